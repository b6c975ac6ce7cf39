package sink

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
)

// Events are made the way production makes them: pgoutput protocol v1 bytes
// decoded by a real decoder.Decoder. event.Event keeps its row private, so
// this is also the only way to give Event.Column values.

// testRow is one outbox row. Payload is a bytea column, so any bytes
// survive the trip; Headers is the JSON text of the headers column.
type testRow struct {
	ID            string
	AggregateType string
	AggregateID   string
	EventType     string
	Payload       []byte
	Headers       string  // "" means NULL
	Tenant        *string // an extra column for templates; nil means NULL
}

func strp(s string) *string { return &s }

// Type OIDs as pgoutput sends them.
const (
	oidBytea       = 17
	oidText        = 25
	oidTimestamptz = 1184
	oidJSONB       = 3802
	testRelID      = 16384
)

type pgMsg []byte

func (m pgMsg) u8(v byte) pgMsg    { return append(m, v) }
func (m pgMsg) u16(v uint16) pgMsg { return binary.BigEndian.AppendUint16(m, v) }
func (m pgMsg) u32(v uint32) pgMsg { return binary.BigEndian.AppendUint32(m, v) }
func (m pgMsg) u64(v uint64) pgMsg { return binary.BigEndian.AppendUint64(m, v) }
func (m pgMsg) str(s string) pgMsg { return append(append(m, s...), 0) }

// value appends one TupleData column: NULL for nil, text otherwise.
func (m pgMsg) value(v *string) pgMsg {
	if v == nil {
		return m.u8('n')
	}
	return append(m.u8('t').u32(uint32(len(*v))), *v...)
}

var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func pgMicros(t time.Time) uint64 { return uint64(t.Sub(pgEpoch).Microseconds()) }

// eventBuilder turns rows into events, one transaction per call to tx, with
// increasing xids and LSNs.
type eventBuilder struct {
	tb  testing.TB
	dec *decoder.Decoder
	xid uint32
	lsn pglogrepl.LSN
	now time.Time
}

func newEventBuilder(tb testing.TB) *eventBuilder {
	tb.Helper()
	dec, err := decoder.New(decoder.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	b := &eventBuilder{tb: tb, dec: dec, xid: 1000, lsn: 0x16B3748,
		now: time.Date(2026, 12, 2, 15, 39, 55, 123456000, time.UTC)}
	cols := []struct {
		name string
		oid  uint32
	}{
		{"id", oidText}, {"aggregate_type", oidText}, {"aggregate_id", oidText},
		{"event_type", oidText}, {"payload", oidBytea}, {"headers", oidJSONB},
		{"created_at", oidTimestamptz}, {"tenant", oidText},
	}
	rel := pgMsg{'R'}.u32(testRelID).str("public").str("outbox").u8('d').u16(uint16(len(cols)))
	for i, c := range cols {
		flags := uint8(0)
		if i == 0 {
			flags = 1
		}
		rel = rel.u8(flags).str(c.name).u32(c.oid).u32(0xFFFFFFFF)
	}
	b.decode(rel)
	return b
}

func (b *eventBuilder) decode(m []byte) decoder.Change {
	b.tb.Helper()
	ch, err := b.dec.Decode(b.lsn, m)
	if err != nil {
		b.tb.Fatalf("decode %q message: %v", m[0], err)
	}
	return ch
}

// tx decodes one transaction holding rows and returns its events.
func (b *eventBuilder) tx(rows ...testRow) []*event.Event {
	b.tb.Helper()
	b.xid++
	b.now = b.now.Add(time.Millisecond)
	commitLSN := b.lsn + pglogrepl.LSN(0x100*(len(rows)+1))
	b.decode(pgMsg{'B'}.u64(uint64(commitLSN)).u64(pgMicros(b.now)).u32(b.xid))
	events := make([]*event.Event, 0, len(rows))
	for _, r := range rows {
		b.lsn += 0x100
		payload := `\x` + hex.EncodeToString(r.Payload)
		var headers *string
		if r.Headers != "" {
			headers = &r.Headers
		}
		created := "2026-12-02 15:39:55.123456+00"
		m := pgMsg{'I'}.u32(testRelID).u8('N').u16(8).
			value(&r.ID).value(&r.AggregateType).value(&r.AggregateID).value(&r.EventType).
			value(&payload).value(headers).value(&created).value(r.Tenant)
		ch := b.decode(m)
		if ch.Kind != decoder.Insert {
			b.tb.Fatalf("insert decoded as %v", ch.Kind)
		}
		events = append(events, ch.Event)
	}
	b.lsn = commitLSN
	b.decode(pgMsg{'C'}.u8(0).u64(uint64(commitLSN)).u64(uint64(commitLSN + 0x30)).u64(pgMicros(b.now)))
	b.lsn += 0x30
	return events
}

// event decodes a transaction with one row.
func (b *eventBuilder) event(r testRow) *event.Event {
	b.tb.Helper()
	return b.tx(r)[0]
}

// eventID is the id of the i-th event of a test (1-based).
func eventID(i int) string { return fmt.Sprintf("0190c1d2-7e4f-7a3b-9c1d-%012d", i) }

// testPayload is a payload that is not valid UTF-8 and holds NUL and CR LF,
// so a body that is re-encoded anywhere on the way shows.
func testPayload(i, size int) []byte {
	p := make([]byte, size)
	for j := range p {
		p[j] = byte(i*31 + j*7)
	}
	if size >= 4 {
		copy(p, []byte{0x00, 0xff, '\r', '\n'})
	}
	return p
}

// items builds n events in transactions of up to perTx rows, with Seq 1..n.
func (b *eventBuilder) items(n, perTx, payloadSize int) []Item {
	b.tb.Helper()
	out := make([]Item, 0, n)
	for len(out) < n {
		rows := make([]testRow, 0, perTx)
		for j := 0; j < perTx && len(out)+j < n; j++ {
			i := len(out) + j + 1
			rows = append(rows, testRow{
				ID:            eventID(i),
				AggregateType: []string{"order", "invoice", "customer"}[i%3],
				AggregateID:   fmt.Sprint(i % 17),
				EventType:     "created",
				Payload:       testPayload(i, payloadSize),
				Headers:       fmt.Sprintf(`{"trace-id": "t-%d", "content-type": "application/octet-stream"}`, i),
				Tenant:        strp("acme"),
			})
		}
		for _, ev := range b.tx(rows...) {
			out = append(out, Item{Seq: uint64(len(out) + 1), Event: ev})
		}
	}
	return out
}

// recordingAcker records acknowledgements. An ack out of sequence order is a
// failure of the test and an error back to Run, as checkpoint.Tracker's
// would be. check, when set, runs before each ack is recorded.
type recordingAcker struct {
	mu    sync.Mutex
	seqs  []uint64
	bad   []string
	check func(seq uint64) error

	count atomic.Uint64 // number of acks, readable without the lock
	// reached is closed once count reaches at, if at > 0.
	at      uint64
	reached chan struct{}
}

func newAcker() *recordingAcker { return &recordingAcker{reached: make(chan struct{})} }

func (a *recordingAcker) Ack(seq uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.check != nil {
		if err := a.check(seq); err != nil {
			a.bad = append(a.bad, err.Error())
		}
	}
	if want := uint64(len(a.seqs)) + 1; seq != want {
		err := fmt.Errorf("ack %d out of order: want %d", seq, want)
		a.bad = append(a.bad, err.Error())
		return err
	}
	a.seqs = append(a.seqs, seq)
	if n := a.count.Add(1); n == a.at {
		close(a.reached)
	}
	return nil
}

// acked returns the recorded acknowledgements and the problems seen.
func (a *recordingAcker) acked() ([]uint64, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]uint64(nil), a.seqs...), append([]string(nil), a.bad...)
}

// run runs p on items and closes in after the last one; it returns Run's
// error. sent, when not nil, is set to the Seq of each item once Run has
// taken it (the send on the unbuffered channel completed).
func run(ctx context.Context, p *Publisher, items []Item, a acker, sent *atomic.Uint64) error {
	// Buffered as the relay's pipeline is, for fast mode batches what
	// waits there; unbuffered when sent is asked for, since an item in a
	// buffer would count as sent before the publisher has it.
	buffer := 64
	if sent != nil {
		buffer = 0
	}
	in := make(chan Item, buffer)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(in)
		for _, it := range items {
			select {
			case in <- it:
				if sent != nil {
					sent.Store(it.Seq)
				}
			case <-done:
				return
			}
		}
	}()
	err := p.Run(ctx, in, a)
	close(done)
	wg.Wait()
	return err
}

// testTemplate parses text or fails the test.
func testTemplate(tb testing.TB, text string) *Template {
	tb.Helper()
	tmpl, err := ParseTemplate(text)
	if err != nil {
		tb.Fatal(err)
	}
	return tmpl
}

// setupStream creates the stream for tmpl with EnsureStream, as outboxd
// does with --create-stream.
func setupStream(tb testing.TB, js jetstream.JetStream, name string, tmpl *Template) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := EnsureStream(ctx, js, name, tmpl, true); err != nil {
		tb.Fatal(err)
	}
}

// createPlainStream creates stream OUTBOX for tmpl as a user might, with
// neither allow_batched nor allow_atomic.
func createPlainStream(ctx context.Context, tb testing.TB, js jetstream.JetStream, tmpl *Template) {
	tb.Helper()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{tmpl.Filter()},
		Storage: jetstream.FileStorage, Duplicates: DefaultDuplicateWindow}); err != nil {
		tb.Fatal(err)
	}
}

// newTestPublisher returns a publisher on js for the stream with fast
// retries.
func newTestPublisher(tb testing.TB, js jetstream.JetStream, maxPayload int64, cfg Config) *Publisher {
	tb.Helper()
	if cfg.RetryMin == 0 {
		cfg.RetryMin = 10 * time.Millisecond
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 250 * time.Millisecond
	}
	p, err := NewPublisher(js, maxPayload, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// newJetStream returns a JetStream context on a new connection to srv.
func newJetStream(tb testing.TB, srv *natstest.Server, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc := srv.Conn(tb)
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

// storedMsg is a message read back from the stream.
type storedMsg struct {
	Seq     uint64
	Subject string
	Header  nats.Header
	Data    []byte
}

// readStream reads every message of the stream in stream order, on its own
// connection.
func readStream(tb testing.TB, srv *natstest.Server, name string) []storedMsg {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js := srv.JetStream(tb)
	stream, err := js.Stream(ctx, name)
	if err != nil {
		tb.Fatalf("read stream %s: %v", name, err)
	}
	want := stream.CachedInfo().State.Msgs
	out := make([]storedMsg, 0, want)
	if want == 0 {
		return out
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	for uint64(len(out)) < want {
		if ctx.Err() != nil {
			tb.Fatalf("read %d of %d messages of %s before the deadline", len(out), want, name)
		}
		// Never ask for more than remain: Fetch waits out FetchMaxWait for
		// a batch it cannot fill.
		batch, err := cons.Fetch(int(min(1000, want-uint64(len(out)))), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			tb.Fatal(err)
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, storedMsg{Seq: md.Sequence.Stream, Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
		}
		if err := batch.Error(); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}
