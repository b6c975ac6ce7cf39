package sink

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
)

// txItems builds transactions of the given sizes, with Seq 1..n and TxEnd
// on the last item of each, as the relay's pipeline hands them on.
func txItems(tb testing.TB, sizes ...int) []Item {
	tb.Helper()
	b := newEventBuilder(tb)
	var out []Item
	for _, size := range sizes {
		for i, item := range b.items(size, size, 16) {
			item.Seq = uint64(len(out) + 1)
			item.Event.ID = eventID(len(out) + 1)
			item.TxEnd = i == size-1
			out = append(out, item)
		}
	}
	return out
}

// checkTransactions checks how each transaction of items was stored: as
// one atomic batch (every message carries the batch's id and its place in
// it, the last the commit) when its split reason is "", else message by
// message with HeaderTxSplit set to the reason. splits gives the reason of
// each transaction, in order; a transaction of one event is never split.
func checkTransactions(t *testing.T, srv *natstest.Server, items []Item, splits []string) {
	t.Helper()
	msgs := readStream(t, srv, "OUTBOX")
	if len(msgs) != len(items) {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), len(items))
	}
	tx, start := 0, 0
	for i, item := range items {
		if !item.TxEnd {
			continue
		}
		size := i - start + 1
		for j, m := range msgs[start : i+1] {
			if err := checkTxMessage(m, j, size, splits[tx]); err != nil {
				t.Errorf("transaction %d (%d events), message %d: %v", tx, size, j+1, err)
				break
			}
		}
		tx, start = tx+1, i+1
	}
	if tx != len(splits) {
		t.Fatalf("%d transactions, want %d", tx, len(splits))
	}
}

// publishAll publishes items with p, and checks that every one is
// acknowledged in order and stored.
func publishAll(ctx context.Context, t *testing.T, p *Publisher, srv *natstest.Server, tmpl *Template, items []Item) {
	t.Helper()
	a := newAcker()
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, a, len(items))
	checkStored(t, srv, "OUTBOX", tmpl, items)
}

// unbatched, as a split reason to check, stands for a transaction
// published message by message without HeaderTxSplit: after the stream
// refused atomic batches.
const unbatched = "(message by message, no header)"

func checkTxMessage(m storedMsg, place, size int, split string) error {
	id, seq := m.Header.Get(jetstreamext.BatchIDHeader), m.Header.Get(jetstreamext.BatchSeqHeader)
	header := split
	if split == unbatched {
		header = ""
	}
	if got := m.Header.Get(HeaderTxSplit); got != header {
		return fmt.Errorf("%s = %q, want %q", HeaderTxSplit, got, header)
	}
	if size == 1 || split != "" {
		if id != "" {
			return fmt.Errorf("stored in batch %s, want message by message", id)
		}
		return nil
	}
	if id == "" || seq != strconv.Itoa(place+1) {
		return fmt.Errorf("batch %q sequence %q, want one batch with this message at %d", id, seq, place+1)
	}
	return nil
}

// TestAtomicTransactions publishes transactions of 1 to 1,001 events, with
// fast and with async publishing underneath: each of 2 to 1,000 events is
// stored as one batch, one event alone, and 1,001 (over the server's
// limit) message by message with the reason; everything in order.
func TestAtomicTransactions(t *testing.T) {
	sizes := []int{1, 2, 1, 10, MaxAtomicBatch, MaxAtomicBatch + 1, 1, 3}
	splits := []string{"", "", "", "", "", SplitTooLarge, "", ""}
	for _, fast := range []bool{false, true} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			ctx := testCtx(t)
			srv := natstest.Start(t)
			nc, js := newJetStream(t, srv)
			tmpl := testTemplate(t, defaultTemplate)
			setupStream(t, js, "OUTBOX", tmpl)
			items := txItems(t, sizes...)
			p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Fast: fast, Atomic: true})
			publishAll(ctx, t, p, srv, tmpl, items)
			checkTransactions(t, srv, items, splits)
		})
	}
}

// TestAtomicPublishedAgain: after a restart the transactions of the
// window are published again. Those the stream holds are refused as
// batches with a duplicate, go message by message, and JetStream drops
// every one: nothing is stored twice, everything is acknowledged.
func TestAtomicPublishedAgain(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := txItems(t, 5, 1, 7)
	obs := &countingObserver{}
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Atomic: true, Observer: obs})
	if err := run(ctx, p, items, newAcker(), nil); err != nil {
		t.Fatal(err)
	}
	a := newAcker()
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, a, len(items))
	checkTransactions(t, srv, items, []string{"", "", ""})
	if published, duplicates, _, _, _ := obs.counts(); published != 2*len(items) || duplicates != len(items) {
		t.Errorf("observer saw %d published, %d duplicates; want %d and %d", published, duplicates, 2*len(items), len(items))
	}
}

// TestAtomicUnfinished: a transaction whose last event never came (the
// replication stream stopped in its middle) is neither published nor
// acknowledged: the next start publishes it whole.
func TestAtomicUnfinished(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := txItems(t, 3, 4)
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Atomic: true})
	a := newAcker()
	if err := run(ctx, p, items[:5], a, nil); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, a, 3)
	checkTransactions(t, srv, items[:3], []string{""})
}

// TestAtomicDeadLetter: a row of a transaction that goes to the
// dead-letter subject takes the transaction out of its batch; the other
// rows go message by message and say why.
func TestAtomicDeadLetter(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	if _, err := EnsureStream(ctx, js, "OUTBOX", tmpl, true, WithDeadLetter("outboxd.dead")); err != nil {
		t.Fatal(err)
	}
	items := txItems(t, 2, 4, 2)
	dead := items[3]
	dead.Dead, dead.Event = &event.RowError{Xid: dead.Event.Tx.Xid, LSN: dead.Event.LSN, EventID: dead.Event.ID, Reason: "bad row"}, nil
	items[3] = dead
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Atomic: true, DeadLetter: "outboxd.dead"})
	a := newAcker()
	if err := run(ctx, p, items, a, nil); err != nil {
		t.Fatal(err)
	}
	checkAcks(t, a, len(items))
	msgs := readStream(t, srv, "OUTBOX")
	if len(msgs) != len(items) {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), len(items))
	}
	for i, m := range msgs {
		var err error
		switch {
		case i < 2:
			err = checkTxMessage(m, i, 2, "")
		case i == 3:
			if m.Subject != "outboxd.dead" {
				err = fmt.Errorf("on %s, want the dead letter", m.Subject)
			}
		case i < 6:
			err = checkTxMessage(m, i-2, 4, SplitDeadLetter)
		default:
			err = checkTxMessage(m, i-6, 2, "")
		}
		if err != nil {
			t.Errorf("message %d: %v", i+1, err)
		}
	}
}

// TestAtomicStreamRefuses: a stream that does not take atomic batches (no
// allow_atomic, as when a stream is changed after the start check)
// refuses the first; that transaction goes message by message saying so,
// and so does everything after it, without a header: nothing is lost.
func TestAtomicStreamRefuses(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	createPlainStream(ctx, t, js, tmpl)
	if err := CheckAtomicBatch(ctx, js, "OUTBOX"); err == nil || !strings.Contains(err.Error(), "allow_atomic") {
		t.Fatalf("CheckAtomicBatch = %v, want one naming allow_atomic", err)
	}
	items := txItems(t, 1, 3, 4)
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Atomic: true})
	publishAll(ctx, t, p, srv, tmpl, items)
	checkTransactions(t, srv, items, []string{"", SplitRefused, unbatched})
}

// TestAtomicLearnsLimit: a limit above the server's is found out at the
// first transaction over the server's: it goes message by message, and so
// do later ones of that size, without another try.
func TestAtomicLearnsLimit(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	tmpl := testTemplate(t, defaultTemplate)
	setupStream(t, js, "OUTBOX", tmpl)
	items := txItems(t, MaxAtomicBatch+2, 5, MaxAtomicBatch+2)
	obs := &countingObserver{}
	p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl, Atomic: true,
		AtomicLimit: 2 * MaxAtomicBatch, Observer: obs})
	publishAll(ctx, t, p, srv, tmpl, items)
	checkTransactions(t, srv, items, []string{SplitTooLarge, "", SplitTooLarge})
	if _, _, _, _, failures := obs.counts(); failures != 0 {
		t.Errorf("%d publish failures reported, want 0: a refusal for size is no failure", failures)
	}
}

func TestServerLimit(t *testing.T) {
	for _, tc := range []struct {
		refusal string
		size    int
		want    int
	}{
		{"atomic publish batch is too large: 1000", 1002, 1000},
		{"atomic publish batch is too large: 50", 1002, 50},
		{"atomic publish batch is too large", 1002, 1001}, // says no limit
		{"atomic publish batch is too large: lots", 1002, 1001},
		{"atomic publish batch is too large: 2000", 1002, 1001}, // not below the refused size
		{"atomic publish batch is too large: 1", 3, 2},
	} {
		if got := serverLimit(tc.refusal, tc.size); got != tc.want {
			t.Errorf("serverLimit(%q, %d) = %d, want %d", tc.refusal, tc.size, got, tc.want)
		}
	}
}

func TestAtomicNotWithExclusive(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := newJetStream(t, srv)
	_, err := NewPublisher(js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: testTemplate(t, defaultTemplate), Atomic: true, Exclusive: true})
	if err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Fatalf("NewPublisher(Atomic, Exclusive) = %v, want an error naming exclusive mode", err)
	}
	_, err = NewPublisher(js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: testTemplate(t, defaultTemplate), Atomic: true, AtomicLimit: 1})
	if err == nil || !strings.Contains(err.Error(), "atomic batch limit 1") {
		t.Fatalf("NewPublisher(AtomicLimit 1) = %v, want an error naming the limit", err)
	}
}
