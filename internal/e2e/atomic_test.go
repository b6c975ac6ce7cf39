package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/sink"
)

// TestAtomicTransactionsWhole: writers commit transactions of 1 to 500
// rows while outboxd (--atomic-transactions on) is killed with SIGKILL and
// restarted, each time the moment a consumer following the stream has got
// half of a transaction. Each time outboxd lies dead, the whole stream is
// read: it must hold no part of a transaction without the rest (in async
// or fast mode a kill in the middle of a transaction leaves its first part
// there until the restart publishes the rest). At the end each transaction
// of two or more events is one batch whose last message carries the batch
// commit, and nothing is lost, duplicated or reordered.
//
// With atomic batches the consumer still gets half a transaction at
// times: the server stores a committed batch message by message, and a
// consumer following the stream can get the first before the last is
// stored. That window is the server's, within one operation, and no crash
// of outboxd can leave it open (docs/publishing.md, "Atomic
// transactions", says what a consumer can rely on).
//
// OUTBOXD_ATOMIC_TEST_MODE=off runs the same with --atomic-transactions
// off, to see the check fail without atomic batches.
func TestAtomicTransactionsWhole(t *testing.T) {
	mode := "on"
	if m := os.Getenv("OUTBOXD_ATOMIC_TEST_MODE"); m != "" {
		mode = m
	}
	e := newEnv(t, pgtest.Shared(t), true)
	check := checker.New()
	w := e.newWriter(check, 200)
	var txSize sync.Map // event id -> the size of its transaction
	w.beforeWrite = func(rows []row) {
		for _, r := range rows {
			txSize.Store(r.ID.String(), len(rows))
		}
	}
	args := e.args("--atomic-transactions", mode)
	p := e.start(args...)
	e.waitStreaming(p)
	halfway := followStream(t, e.js(), &txSize)

	const total = 30_000
	wrng := rand.New(rand.NewPCG(5, 6))
	writes := w.background(total, 100*time.Millisecond, func(int) (int, bool) { return 1 + wrng.IntN(500), wrng.IntN(10) != 0 })
	const kills = 8
	var whileDown [][]message
	for i := 0; i < kills; i++ {
		select {
		case <-halfway:
		case <-time.After(10 * time.Second):
			t.Logf("kill %d: no consumer halfway through a transaction for 10 s", i+1)
		}
		p.kill()
		// A batch whose commit the server is storing as outboxd dies is
		// stored whole a moment later (its window, not outboxd's): read
		// the stream once it stopped growing.
		waitStreamSettled(t, e.js())
		whileDown = append(whileDown, e.readStream(e.js(), 0, time.Second))
		t.Logf("kill -9 #%d after %d committed events; the stream held %d", i+1, check.Count(), len(whileDown[i]))
		p = e.start(args...)
		e.waitStreaming(p)
		select {
		case <-halfway: // a moment before the restart
		default:
		}
	}
	if err := writes.Wait(); err != nil {
		t.Fatal(err)
	}
	msgs := e.readStream(e.js(), check.Count(), 3*time.Minute)
	report := check.Verify(received(t, msgs))
	if !report.OK() {
		t.Errorf("stream check failed: %s", report)
	}
	sizes := checkBatches(t, msgs, mode == "on")
	cut := 0
	for i, snapshot := range whileDown {
		cut += checkWholeWhileDown(t, i+1, snapshot, sizes)
	}
	t.Logf("after %d kills: %s; %d transactions of 1-%d events; transactions cut while outboxd was down: %d",
		kills, report, len(sizes), maxSize(sizes), cut)
	p.stopCleanly()
}

// followStream follows the stream with an ordered consumer and signals on
// the returned channel whenever it has got half of a transaction of 50
// events or more (txSize maps event ids to their transaction's size).
func followStream(t *testing.T, js jetstream.JetStream, txSize *sync.Map) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, streamName)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	halfway := make(chan struct{}, 1)
	got := make(map[string]int) // the consume callback's only
	cc, err := cons.Consume(func(m jetstream.Msg) {
		size, ok := txSize.Load(m.Headers().Get(jetstream.MsgIDHeader))
		if !ok || size.(int) < 50 {
			return
		}
		tx := m.Headers().Get(sink.HeaderXid) + "/" + m.Headers().Get(sink.HeaderLSN)
		if got[tx]++; got[tx] == size.(int)/2 {
			select {
			case halfway <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Stop()
		<-cc.Closed()
	})
	return halfway
}

// waitStreamSettled waits until the stream's last sequence stays the same
// for 200 ms (at most 10 s).
func waitStreamSettled(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last uint64
	for same := 0; same < 4; {
		stream, err := js.Stream(ctx, streamName)
		if err != nil {
			t.Fatalf("the stream did not settle: %v", err)
		}
		if seq := stream.CachedInfo().State.LastSeq; seq == last {
			same++
		} else {
			last, same = seq, 0
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func txOf(m message) string {
	return m.Header.Get(sink.HeaderXid) + "/" + m.Header.Get(sink.HeaderLSN)
}

// checkBatches checks that the stream holds each transaction's messages
// together and, when batched, each transaction of two or more events as
// one atomic batch: one Nats-Batch-Id, its sequence, the commit on the
// last. It returns each transaction's size.
func checkBatches(t *testing.T, msgs []message, batched bool) map[string]int {
	t.Helper()
	sizes := make(map[string]int)
	var txs [][]message
	for _, m := range msgs {
		tx := txOf(m)
		if n := len(txs); n == 0 || txOf(txs[n-1][0]) != tx {
			if sizes[tx] > 0 {
				t.Errorf("transaction %s is not contiguous in the stream (again at seq %d)", tx, m.Seq)
			}
			txs = append(txs, nil)
		}
		txs[len(txs)-1] = append(txs[len(txs)-1], m)
		sizes[tx]++
	}
	if !batched {
		return sizes
	}
	for _, tx := range txs {
		if len(tx) == 1 {
			continue
		}
		id := tx[0].Header.Get(jetstreamext.BatchIDHeader)
		for i, m := range tx {
			if m.Header.Get(jetstreamext.BatchIDHeader) != id || id == "" || m.Header.Get(jetstreamext.BatchSeqHeader) != strconv.Itoa(i+1) {
				t.Errorf("transaction %s: message %d of %d (seq %d) is in batch %q at %q, want batch %q at %d",
					txOf(m), i+1, len(tx), m.Seq, m.Header.Get(jetstreamext.BatchIDHeader), m.Header.Get(jetstreamext.BatchSeqHeader), id, i+1)
				break
			}
		}
		if last := tx[len(tx)-1]; last.Header.Get(jetstreamext.BatchCommitHeader) != "1" {
			t.Errorf("transaction %s: its last message (seq %d) lacks %s", txOf(last), last.Seq, jetstreamext.BatchCommitHeader)
		}
	}
	return sizes
}

// checkWholeWhileDown checks that the stream, as read while outboxd was
// down after kill n, held every transaction it held part of whole, and
// returns how many it held only part of.
func checkWholeWhileDown(t *testing.T, n int, snapshot []message, sizes map[string]int) int {
	t.Helper()
	held := make(map[string]int)
	for _, m := range snapshot {
		held[txOf(m)]++
	}
	cut := 0
	for tx, got := range held {
		if got < sizes[tx] {
			cut++
			t.Errorf("while outboxd lay dead after kill %d the stream held %d of the %d events of transaction %s", n, got, sizes[tx], tx)
		}
	}
	return cut
}

func maxSize(sizes map[string]int) int {
	m := 0
	for _, n := range sizes {
		m = max(m, n)
	}
	return m
}
