// Package checker verifies a stream against what writers committed: it
// counts lost, unexpected and duplicated events and per-aggregate order
// violations. Tests pass only when all four are zero (docs/design.md, "Test
// environment").
package checker

import (
	"fmt"
	"sync"

	"github.com/jackc/pglogrepl"
)

// Event is one outbox row as a writer saw it.
type Event struct {
	ID        string
	Aggregate string
}

// Received is one message read back from the stream, in stream order.
type Received struct {
	ID        string
	Aggregate string
	// CommitLSN is the Outbox-Lsn header: the commit LSN of its transaction.
	CommitLSN pglogrepl.LSN
}

// Report is the outcome of Verify.
type Report struct {
	Committed, RolledBack, InStream int
	// Uncertain counts events whose commit outcome the writer could not know.
	Uncertain                    int
	Lost, Unexpected, Duplicates int
	OrderViolations              int
	// FirstProblems holds a few examples, for the failure message.
	FirstProblems []string
}

// OK reports whether nothing was lost, unexpected, duplicated or reordered.
func (r Report) OK() bool {
	return r.Lost == 0 && r.Unexpected == 0 && r.Duplicates == 0 && r.OrderViolations == 0
}

func (r Report) String() string {
	return fmt.Sprintf("committed=%d rolled_back=%d uncertain=%d in_stream=%d lost=%d unexpected=%d duplicates=%d order_violations=%d %v",
		r.Committed, r.RolledBack, r.Uncertain, r.InStream, r.Lost, r.Unexpected, r.Duplicates, r.OrderViolations, r.FirstProblems)
}

// Checker collects what writers committed and rolled back. It is safe for
// concurrent writers.
type Checker struct {
	mu         sync.Mutex
	committed  map[string]position
	rolledBack map[string]bool
	uncertain  map[string]bool
	txs        int
}

// position orders an event among those one writer committed: transaction
// number, then place in the transaction.
type position struct {
	tx, index int
}

// New returns an empty checker.
func New() *Checker {
	return &Checker{committed: map[string]position{}, rolledBack: map[string]bool{}, uncertain: map[string]bool{}}
}

// Committed records a transaction whose COMMIT succeeded, rows in insert order.
func (c *Checker) Committed(tx []Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txs++
	for i, ev := range tx {
		c.committed[ev.ID] = position{tx: c.txs, index: i}
	}
}

// RolledBack records a transaction that was rolled back (or whose outcome
// the writer knows to be a failure).
func (c *Checker) RolledBack(tx []Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range tx {
		c.rolledBack[ev.ID] = true
	}
}

// Uncertain records a transaction whose COMMIT got no answer (the server
// went away mid-commit): it may or may not have committed. Its events are
// neither lost when missing nor unexpected when present, but are still
// checked for duplicates and order.
func (c *Checker) Uncertain(tx []Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txs++
	for i, ev := range tx {
		c.uncertain[ev.ID] = true
		c.committed[ev.ID] = position{tx: c.txs, index: i}
	}
}

// Count returns how many events were recorded as committed (not counting
// uncertain ones).
func (c *Checker) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.committed) - len(c.uncertain)
}

// Verify compares the stream with the record. Order is checked per
// aggregate: in stream order, each aggregate's events must follow commit
// order (commit LSN, then insert order within the transaction).
func (c *Checker) Verify(stream []Received) Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Report{Committed: len(c.committed) - len(c.uncertain), RolledBack: len(c.rolledBack),
		Uncertain: len(c.uncertain), InStream: len(stream)}
	problem := func(format string, args ...any) {
		if len(r.FirstProblems) < 5 {
			r.FirstProblems = append(r.FirstProblems, fmt.Sprintf(format, args...))
		}
	}
	type last struct {
		lsn pglogrepl.LSN
		pos position
		id  string
	}
	seen := make(map[string]bool, len(stream))
	lastByAggregate := map[string]last{}
	for i, m := range stream {
		if seen[m.ID] {
			r.Duplicates++
			problem("duplicate %s at stream position %d", m.ID, i+1)
			continue
		}
		seen[m.ID] = true
		pos, ok := c.committed[m.ID]
		if !ok {
			r.Unexpected++
			problem("unexpected %s (rolled back: %v) at stream position %d", m.ID, c.rolledBack[m.ID], i+1)
			continue
		}
		prev, had := lastByAggregate[m.Aggregate]
		if had && (m.CommitLSN < prev.lsn || (m.CommitLSN == prev.lsn && pos.tx == prev.pos.tx && pos.index < prev.pos.index)) {
			r.OrderViolations++
			problem("aggregate %s: %s (commit %s) after %s (commit %s)", m.Aggregate, m.ID, m.CommitLSN, prev.id, prev.lsn)
		}
		lastByAggregate[m.Aggregate] = last{lsn: m.CommitLSN, pos: pos, id: m.ID}
	}
	for id := range c.committed {
		if !seen[id] && !c.uncertain[id] {
			r.Lost++
			problem("lost %s", id)
		}
	}
	return r
}
