package relay

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progressEvery is how often a progress line is written when the output
// is not a terminal.
const progressEvery = 5 * time.Second

// backfillProgress counts the backfill's acknowledged rows and shows
// them: a progress bar (rows done / total, rate, ETA) on a terminal,
// otherwise a line at the start, every progressEvery, and at the end. The
// publisher acknowledges to it (sink's acker); finish is called after.
type backfillProgress struct {
	total int64
	done  atomic.Int64
	// duplicates and dead count the acknowledgements that were duplicates
	// (the old relay, or an earlier backfill, stored the id first) and
	// dead letters; the publisher reports them as an Observer.
	duplicates, dead atomic.Int64
	// held counts the rows left out because the stream holds them (backfill
	// --since); they count as done.
	held  atomic.Int64
	mu    sync.Mutex // serialises Ack's drawing
	start time.Time
	// bar is nil when not on a terminal; then lines go to out.
	bar      *progressbar.ProgressBar
	out      io.Writer
	lastLine time.Time
	shown    int64 // the count of the last line, -1 before the first
}

func newProgress(out io.Writer, terminal bool, total int64) *backfillProgress {
	p := &backfillProgress{total: total, start: time.Now(), out: out, shown: -1}
	if terminal {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(out),
			progressbar.OptionSetDescription("backfill"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("rows"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(out) }),
		)
		return p
	}
	p.line(0)
	return p
}

// leftOut records a row the stream holds already, not published again.
func (p *backfillProgress) leftOut() error {
	p.held.Add(1)
	return p.Ack(0)
}

// Ack records one acknowledged row; the publisher calls it in order.
func (p *backfillProgress) Ack(uint64) error {
	// leftOut's rows come from the reading goroutine.
	p.mu.Lock()
	defer p.mu.Unlock()
	done := p.done.Add(1)
	if p.bar != nil {
		return p.bar.Set64(done)
	}
	if time.Since(p.lastLine) >= progressEvery {
		p.line(done)
	}
	return nil
}

// finish shows the final count and returns it.
func (p *backfillProgress) finish() int64 {
	done := p.done.Load()
	if p.bar != nil {
		if done == p.total {
			p.bar.Finish() //nolint:errcheck // drawing the bar is best effort
		} else {
			p.bar.Exit() //nolint:errcheck
			fmt.Fprintln(p.out)
		}
		return done
	}
	if done != p.shown {
		p.line(done)
	}
	return done
}

// line writes "backfill: done/total rows (pct), rate rows/s, ETA d".
func (p *backfillProgress) line(done int64) {
	p.lastLine, p.shown = time.Now(), done
	elapsed := time.Since(p.start)
	pct, rate := 100.0, 0.0
	if p.total > 0 {
		pct = 100 * float64(done) / float64(p.total)
	}
	if elapsed > 0 {
		rate = float64(done) / elapsed.Seconds()
	}
	eta := "unknown"
	switch {
	case done >= p.total:
		eta = "0s"
	case rate > 0:
		eta = time.Duration(float64(p.total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	fmt.Fprintf(p.out, "backfill: %d/%d rows (%.1f%%), %.0f rows/s, ETA %s\n", done, p.total, pct, rate, eta)
}

// Published counts the duplicates among the acknowledged events.
func (p *backfillProgress) Published(_ time.Time, duplicate bool) {
	if duplicate {
		p.duplicates.Add(1)
	}
}

// DeadLettered counts the rows sent to the dead-letter subject.
func (p *backfillProgress) DeadLettered() { p.dead.Add(1) }

// PublishFailed is nothing to count: the publisher retries and logs.
func (p *backfillProgress) PublishFailed(string) {}
