package relay

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/event"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// testTx is one transaction as the decoder hands it on: Begin, an Insert
// per event, Commit.
type testTx struct {
	commit pglogrepl.LSN // the commit record's LSN (Begin's final LSN)
	end    pglogrepl.LSN // the transaction's end, confirmed once acked
	at     time.Time     // commit time
	events int
}

func (tx testTx) changes(xid uint32) []decoder.Change {
	info := event.TxInfo{Xid: xid, CommitLSN: tx.commit, CommitTime: tx.at}
	out := []decoder.Change{{Kind: decoder.Begin, Tx: info}}
	for i := range tx.events {
		ev := &event.Event{ID: fmt.Sprintf("tx%d-%d", xid, i), Tx: info}
		out = append(out, decoder.Change{Kind: decoder.Insert, Tx: info, Event: ev})
	}
	return append(out, decoder.Change{Kind: decoder.Commit, Tx: info, EndLSN: tx.end})
}

// newTestPipeline is a pipeline with a real decoder and tracker, resuming
// at skipBefore after streaming from from; nothing runs.
func newTestPipeline(t *testing.T, from, skipBefore pglogrepl.LSN, committedBy time.Time, deadLetters bool) *pipeline {
	t.Helper()
	dec, err := decoder.New(decoder.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline{decoder: dec, tracker: checkpoint.NewTracker(skipBefore), skipBefore: skipBefore, from: from,
		committedBy: committedBy, restored: "delete the checkpoint", deadLetters: deadLetters, log: zerolog.Nop()}
	p.checked.Store(from >= skipBefore)
	return p
}

// drain acks every item handed on, in order, and returns their ids (a
// dead letter's as "dead:ID").
func drain(t *testing.T, p *pipeline, items chan sink.Item) []string {
	t.Helper()
	if err := p.release(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	close(items)
	var ids []string
	for item := range items {
		id := ""
		if item.Dead != nil {
			id = "dead:" + item.Dead.EventID
		} else {
			id = item.Event.ID
		}
		if item.TxEnd {
			id += " (end)"
		}
		ids = append(ids, id)
		if err := p.tracker.Ack(item.Seq); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// TestPipelineTransactions: transactions that commit before the resume
// point are dropped whole (they were published before the checkpoint was
// saved), unless one committed after the checkpoint was saved, which
// stops the relay; the rest are handed on in order, each transaction's
// last event marked as such (TxEnd, for atomic mode), and the safe
// position reaches a transaction's end only once its events are
// acknowledged.
func TestPipelineTransactions(t *testing.T) {
	saved := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	before, after := saved.Add(-time.Minute), saved.Add(time.Hour)
	tests := []struct {
		name             string
		from, skipBefore pglogrepl.LSN
		committedBy      time.Time
		txs              []testTx
		wantIDs          []string
		wantSafe         pglogrepl.LSN
		wantChecked      bool
		wantErr          string
	}{
		{name: "all after the resume point", from: 0x100, skipBefore: 0x100,
			txs:     []testTx{{commit: 0x150, end: 0x158, events: 2}, {commit: 0x250, end: 0x258, events: 1}},
			wantIDs: []string{"tx1-0", "tx1-1 (end)", "tx2-0 (end)"}, wantSafe: 0x258, wantChecked: true},
		{name: "before the resume point: dropped whole", from: 0x100, skipBefore: 0x200, committedBy: saved.Add(clockSkew),
			txs:     []testTx{{commit: 0x150, end: 0x158, at: before, events: 2}, {commit: 0x250, end: 0x258, at: after, events: 1}},
			wantIDs: []string{"tx2-0 (end)"}, wantSafe: 0x258, wantChecked: true},
		{name: "not yet past the resume point: unchecked", from: 0x100, skipBefore: 0x200, committedBy: saved.Add(clockSkew),
			txs:     []testTx{{commit: 0x150, end: 0x158, at: before, events: 2}},
			wantIDs: nil, wantSafe: 0x200, wantChecked: false},
		{name: "empty transaction", from: 0x100, skipBefore: 0x100,
			txs:     []testTx{{commit: 0x150, end: 0x158}},
			wantIDs: nil, wantSafe: 0x158, wantChecked: true},
		{name: "dropped transaction committed after the checkpoint was saved", from: 0x100, skipBefore: 0x200,
			committedBy: saved.Add(clockSkew),
			txs:         []testTx{{commit: 0x150, end: 0x158, at: saved.Add(clockSkew + time.Second), events: 1}},
			wantErr:     "committed at 2026-12-05T12:05:01Z, before the checkpoint's position 0/200 but after the checkpoint was saved"},
		{name: "within the clock skew: dropped", from: 0x100, skipBefore: 0x200, committedBy: saved.Add(clockSkew),
			txs:     []testTx{{commit: 0x150, end: 0x158, at: saved.Add(clockSkew - time.Second), events: 1}},
			wantIDs: nil, wantSafe: 0x200},
		{name: "no save time to hold it to", from: 0x100, skipBefore: 0x200,
			txs:     []testTx{{commit: 0x150, end: 0x158, at: after, events: 1}, {commit: 0x200, end: 0x208, at: after, events: 1}},
			wantIDs: []string{"tx2-0 (end)"}, wantSafe: 0x208, wantChecked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPipeline(t, tt.from, tt.skipBefore, tt.committedBy, false)
			items := make(chan sink.Item, 100)
			var err error
			for i, tx := range tt.txs {
				for _, ch := range tx.changes(uint32(i + 1)) {
					if err = p.handle(context.Background(), ch, items); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			ids := drain(t, p, items)
			if tt.wantErr != "" {
				if err == nil || !Permanent(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want a permanent one with %q", err, tt.wantErr)
				}
				if len(ids) != 0 {
					t.Errorf("handed on %q before stopping", ids)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, tt.wantIDs) {
				t.Errorf("handed on %q, want %q", ids, tt.wantIDs)
			}
			if got := p.tracker.Safe(); got != tt.wantSafe {
				t.Errorf("safe position %s, want %s", got, tt.wantSafe)
			}
			if got := p.checked.Load(); got != tt.wantChecked {
				t.Errorf("checked %v, want %v", got, tt.wantChecked)
			}
		})
	}
}

// TestPipelineDeadRows: with a dead-letter subject, a row the decoder
// rejects is handed on as a dead letter in its place (or dropped before
// the resume point, where it was dead-lettered already); without one, or
// for any other error, the error stops the relay. A non-transactional
// message's dead letter is confirmable on its own.
func TestPipelineDeadRows(t *testing.T) {
	rowErr := func(id string, lsn pglogrepl.LSN, message bool) error {
		return fmt.Errorf("decode: %w", &event.RowError{EventID: id, LSN: lsn, Column: "payload", Reason: "is NULL", Message: message})
	}
	tests := []struct {
		name        string
		deadLetters bool
		skipping    bool
		err         error
		wantIDs     []string
		wantSafe    pglogrepl.LSN
		wantErr     bool
	}{
		{name: "dead letters off", err: rowErr("e1", 0x300, false), wantErr: true, wantSafe: 0x200},
		{name: "row in a transaction", deadLetters: true, err: rowErr("e1", 0x300, false),
			wantIDs: []string{"dead:e1"}, wantSafe: 0x200},
		{name: "row of a skipped transaction", deadLetters: true, skipping: true, err: rowErr("e1", 0x150, false),
			wantSafe: 0x200},
		{name: "message alone, after the resume point", deadLetters: true, err: rowErr("m1", 0x300, true),
			wantIDs: []string{"dead:m1 (end)"}, wantSafe: 0x300},
		{name: "message alone, before the resume point", deadLetters: true, err: rowErr("m1", 0x150, true),
			wantSafe: 0x200},
		{name: "not a row error", deadLetters: true, err: fmt.Errorf("decode: %w", decoder.ErrMalformed), wantErr: true, wantSafe: 0x200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPipeline(t, 0x200, 0x200, time.Time{}, tt.deadLetters)
			p.skipping = tt.skipping
			items := make(chan sink.Item, 10)
			err := p.deadLetter(context.Background(), tt.err, items)
			ids := drain(t, p, items)
			if tt.wantErr != errors.Is(err, tt.err) || (err != nil) != tt.wantErr {
				t.Fatalf("deadLetter = %v, want the error back: %v", err, tt.wantErr)
			}
			if !slices.Equal(ids, tt.wantIDs) {
				t.Errorf("handed on %q, want %q", ids, tt.wantIDs)
			}
			if got := p.tracker.Safe(); got != tt.wantSafe {
				t.Errorf("safe position %s, want %s", got, tt.wantSafe)
			}
		})
	}
}

// pgoutput messages as the server writes them, for the pipeline's real
// decoder: Begin, Relation, Insert (text values; nil is NULL) and Commit.
func pgBegin(final pglogrepl.LSN, xid uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'B'}, uint64(final)), 0), xid)
}

func pgCommit(commit, end pglogrepl.LSN) []byte {
	b := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'C', 0}, uint64(commit)), uint64(end))
	return binary.BigEndian.AppendUint64(b, 0)
}

// pgRelation describes public.outbox with a text id and a jsonb payload.
func pgRelation(id uint32) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'R'}, id)
	b = append(b, "public\x00outbox\x00d"...)
	b = binary.BigEndian.AppendUint16(b, 2)
	for _, c := range []struct {
		name string
		oid  uint32
	}{{"id", 25}, {"payload", 3802}} {
		b = append(append(append(b, 0), c.name...), 0)
		b = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(b, c.oid), 0xFFFFFFFF)
	}
	return b
}

func pgInsert(rel uint32, values ...*string) []byte {
	b := binary.BigEndian.AppendUint16(append(binary.BigEndian.AppendUint32([]byte{'I'}, rel), 'N'), uint16(len(values)))
	for _, v := range values {
		if v == nil {
			b = append(b, 'n')
			continue
		}
		b = append(binary.BigEndian.AppendUint32(append(b, 't'), uint32(len(*v))), *v...)
	}
	return b
}

// TestPipelineNullPayload runs rows with NULL payloads through the real
// decoder under each --null-payload policy: stop stops at the first (or
// dead-letters each), skip hands on none of them yet confirms their
// transactions in order, each counted and logged, and empty hands them on
// marked. Ids carry --id-prefix throughout.
func TestPipelineNullPayload(t *testing.T) {
	payload := `{"n": 1}`
	// tx 1: a row, a NULL payload, a row; tx 2: only a NULL payload.
	msgs := []replication.Message{
		{WALStart: 0x110, Data: pgRelation(16384)},
		{WALStart: 0x120, Data: pgBegin(0x150, 7)},
		{WALStart: 0x130, Data: pgInsert(16384, ptr("r1"), &payload)},
		{WALStart: 0x138, Data: pgInsert(16384, ptr("r2"), nil)},
		{WALStart: 0x140, Data: pgInsert(16384, ptr("r3"), &payload)},
		{WALStart: 0x158, Data: pgCommit(0x150, 0x158)},
		{WALStart: 0x220, Data: pgBegin(0x250, 8)},
		{WALStart: 0x230, Data: pgInsert(16384, ptr("r4"), nil)},
		{WALStart: 0x258, Data: pgCommit(0x250, 0x258)},
	}
	tests := []struct {
		name        string
		policy      NullPayload
		deadLetters bool
		wantIDs     []string
		wantNull    []string // the ids handed on marked NullPayload
		wantSafe    []pglogrepl.LSN
		wantErr     []string
		wantSkipped float64
		wantLogged  []string
	}{
		{name: "stop", policy: NullPayloadStop, wantIDs: []string{"p:r1"}, wantSafe: []pglogrepl.LSN{0x100},
			wantErr: []string{`outbox row id "p:r2" (xid 7, lsn 0/138): column "payload" is NULL`, "--null-payload skip", "--null-payload empty"}},
		{name: "default is stop", policy: "", wantIDs: []string{"p:r1"}, wantSafe: []pglogrepl.LSN{0x100},
			wantErr: []string{`"p:r2"`, `column "payload" is NULL`}},
		{name: "stop with dead letters", policy: NullPayloadStop, deadLetters: true,
			wantIDs: []string{"p:r1", "dead:p:r2", "p:r3", "dead:p:r4"}, wantSafe: []pglogrepl.LSN{0x100, 0x100, 0x158, 0x258}},
		{name: "skip", policy: NullPayloadSkip,
			wantIDs: []string{"p:r1", "p:r3"}, wantSafe: []pglogrepl.LSN{0x100, 0x258}, wantSkipped: 2,
			wantLogged: []string{`"event_id":"p:r2","xid":7,"lsn":"0/138"`, `"event_id":"p:r4","xid":8,"lsn":"0/230"`}},
		{name: "empty", policy: NullPayloadEmpty,
			wantIDs: []string{"p:r1", "p:r2", "p:r3", "p:r4"}, wantNull: []string{"p:r2", "p:r4"}, wantSafe: []pglogrepl.LSN{0x100, 0x100, 0x158, 0x258}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Columns, cfg.IDPrefix, cfg.NullPayload = decoder.Columns{ID: "id", Payload: "payload"}, "p:", tt.policy
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			p := newTestPipeline(t, 0x100, 0x100, time.Time{}, tt.deadLetters)
			dec, err := decoder.New(cfg.decoderConfig())
			if err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			p.decoder, p.skipNull, p.metrics, p.log = dec, cfg.NullPayload == NullPayloadSkip, telemetry.NewMetrics("OUTBOX"), zerolog.New(&logged)
			items := make(chan sink.Item, 100)
			for _, m := range msgs {
				if err = p.decodeOne(context.Background(), m, items); err != nil {
					break
				}
			}
			if rerr := p.release(context.Background(), items); rerr != nil { // as decode does
				t.Fatal(rerr)
			}
			close(items)
			// Ack one by one: a skipped row must neither hold the safe
			// position back nor let it pass an unacknowledged event.
			var ids, null []string
			var safe []pglogrepl.LSN
			for item := range items {
				switch {
				case item.Dead != nil:
					ids = append(ids, "dead:"+item.Dead.EventID)
					if string(item.Dead.Row.Payload) != "" {
						t.Errorf("dead letter of %s has body %q", item.Dead.EventID, item.Dead.Row.Payload)
					}
				default:
					ids = append(ids, item.Event.ID)
					if item.Event.NullPayload {
						null = append(null, item.Event.ID)
					} else if string(item.Event.Payload) != payload {
						t.Errorf("event %s payload %q", item.Event.ID, item.Event.Payload)
					}
				}
				if err := p.tracker.Ack(item.Seq); err != nil {
					t.Fatal(err)
				}
				safe = append(safe, p.tracker.Safe())
			}
			if len(tt.wantErr) > 0 {
				var rowErr *event.RowError
				if !errors.As(err, &rowErr) {
					t.Fatalf("error %v, want a *event.RowError", err)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q\ndoes not say %q", err, want)
					}
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, tt.wantIDs) || !slices.Equal(null, tt.wantNull) {
				t.Errorf("handed on %q (NULL payloads %q), want %q (%q)", ids, null, tt.wantIDs, tt.wantNull)
			}
			if !slices.Equal(safe, tt.wantSafe) {
				t.Errorf("safe position after each ack %v, want %v", safe, tt.wantSafe)
			}
			if got := metricValue(t, p.metrics, "outboxd_null_payloads_skipped_total"); got != tt.wantSkipped {
				t.Errorf("outboxd_null_payloads_skipped_total = %v, want %v", got, tt.wantSkipped)
			}
			lines := strings.Count(logged.String(), "--null-payload skip")
			if lines != len(tt.wantLogged) {
				t.Errorf("%d skip log lines, want %d:\n%s", lines, len(tt.wantLogged), logged.String())
			}
			for _, want := range tt.wantLogged {
				if !strings.Contains(logged.String(), want) || !strings.Contains(logged.String(), `"level":"warn"`) {
					t.Errorf("log does not say %s at warn:\n%s", want, logged.String())
				}
			}
		})
	}
}

// metricValue reads a counter without labels from m's registry.
func metricValue(t *testing.T, m *telemetry.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
