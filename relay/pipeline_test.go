package relay

import (
	"context"
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
	close(items)
	var ids []string
	for item := range items {
		if item.Dead != nil {
			ids = append(ids, "dead:"+item.Dead.EventID)
		} else {
			ids = append(ids, item.Event.ID)
		}
		if err := p.tracker.Ack(item.Seq); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// TestPipelineTransactions: transactions that commit before the resume
// point are dropped whole (they were published before the checkpoint was
// saved), unless one committed after the checkpoint was saved, which
// stops the relay; the rest are handed on in order, and the safe position
// reaches a transaction's end only once its events are acknowledged.
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
			wantIDs: []string{"tx1-0", "tx1-1", "tx2-0"}, wantSafe: 0x258, wantChecked: true},
		{name: "before the resume point: dropped whole", from: 0x100, skipBefore: 0x200, committedBy: saved.Add(clockSkew),
			txs:     []testTx{{commit: 0x150, end: 0x158, at: before, events: 2}, {commit: 0x250, end: 0x258, at: after, events: 1}},
			wantIDs: []string{"tx2-0"}, wantSafe: 0x258, wantChecked: true},
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
			wantIDs: []string{"tx2-0"}, wantSafe: 0x208, wantChecked: true},
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
			wantIDs: []string{"dead:m1"}, wantSafe: 0x300},
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
