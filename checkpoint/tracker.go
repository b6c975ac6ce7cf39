package checkpoint

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
)

// ErrUnknownSeq is returned by [Tracker.Ack] for a sequence number that
// [Tracker.Add] never handed out.
var ErrUnknownSeq = errors.New("ack of a sequence number that was never added")

// Tracker computes the safe LSN from the messages in flight (docs/design.md,
// invariants 1 and 7). It does no I/O.
//
// One producer goroutine calls Add for each message of a transaction, in
// commit order, then Commit with the transaction's end LSN; between
// transactions it may call Idle. The sink goroutine calls Ack when JetStream
// acknowledges a message, in any order. Any goroutine may call Safe and
// InFlight.
//
// A message that is republished after a failed publish keeps the sequence
// number Add gave it: acknowledging it twice is harmless, calling Add again
// for it is not (the tracker would count it as a new message of the open
// transaction).
//
// Memory is proportional to the largest number of messages and committed
// transactions in flight at once, not to the history: a ring of pending
// transactions and a bitmap of out-of-order acks, both reused, so the steady
// state allocates nothing.
type Tracker struct {
	mu sync.Mutex

	last      uint64 // newest sequence number handed out by Add
	committed uint64 // last as of the most recent Commit
	acked     uint64 // every sequence number <= acked is acknowledged

	// bits records acks that arrived ahead of acked+1, for sequence numbers
	// in (acked, last]; bit (seq & mask) stands for seq. Bits outside that
	// window are always zero.
	bits  []uint64
	mask  uint64
	ahead uint64 // number of bits set

	// txns is a ring of committed transactions that still wait for acks, in
	// commit order, each with a distinct last sequence number > acked.
	txns []pendingTx
	head int
	n    int

	safe atomic.Uint64 // pglogrepl.LSN; written under mu, read lock-free
}

type pendingTx struct {
	end  pglogrepl.LSN // Commit end LSN
	last uint64        // sequence number of its last message
}

const (
	initialAckBits = 1024
	initialTxns    = 64
)

// NewTracker returns a tracker whose safe LSN starts at start (normally the
// checkpoint or the slot's confirmed_flush_lsn).
func NewTracker(start pglogrepl.LSN) *Tracker {
	t := &Tracker{
		bits: make([]uint64, initialAckBits/64),
		mask: initialAckBits - 1,
		txns: make([]pendingTx, initialTxns),
	}
	t.safe.Store(uint64(start))
	return t
}

// Add records that a message of the open transaction entered the pipeline
// and returns its sequence number: 1, 2, 3, and so on. The message belongs to
// the transaction that the next Commit closes.
func (t *Tracker) Add() uint64 {
	t.mu.Lock()
	t.last++
	if t.last-t.acked > t.mask+1 {
		t.growBits()
	}
	seq := t.last
	t.mu.Unlock()
	return seq
}

// Commit records that the open transaction is complete: its messages are
// all those added since the previous Commit (possibly none), and end is its
// Commit message's end LSN. Once those messages and every earlier one are
// acknowledged, Safe reaches end.
func (t *Tracker) Commit(end pglogrepl.LSN) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.committed = t.last
	switch {
	case t.n == 0 && t.last == t.acked:
		t.advance(end)
	case t.n > 0 && t.back().last == t.last:
		// No message since the previous Commit, which still waits: both
		// become safe on the same ack, so keep one entry with the later end.
		// This keeps a run of empty transactions behind a slow ack from
		// growing the ring.
		if b := t.back(); end > b.end {
			b.end = end
		}
	default:
		t.push(pendingTx{end: end, last: t.last})
	}
}

// Ack records that JetStream acknowledged message seq. Acks may arrive in any
// order. Acknowledging a message again is a no-op (republishing after a
// failure does that). Acknowledging a sequence number Add never returned is
// an error matching ErrUnknownSeq and changes nothing: it is a bug in the
// caller, and ignoring it cannot move Safe.
func (t *Tracker) Ack(seq uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq == 0 || seq > t.last {
		return fmt.Errorf("ack seq %d (last added %d): %w", seq, t.last, ErrUnknownSeq)
	}
	if seq <= t.acked {
		return nil
	}
	if seq != t.acked+1 {
		w, b := (seq&t.mask)>>6, seq&63
		if t.bits[w]&(1<<b) == 0 {
			t.bits[w] |= 1 << b
			t.ahead++
		}
		return nil
	}
	t.acked = seq
	for t.acked < t.last {
		next := t.acked + 1
		w, b := (next&t.mask)>>6, next&63
		if t.bits[w]&(1<<b) == 0 {
			break
		}
		t.bits[w] &^= 1 << b
		t.ahead--
		t.acked = next
	}
	t.release()
	return nil
}

// Idle lets an idle slot advance (docs/design.md, invariant 1): the caller
// promises that no transaction is open, and walEnd is the server's WAL end
// from a keepalive. If every added message is acknowledged and every
// committed transaction is safe, Safe becomes max(Safe, walEnd); otherwise
// Idle does nothing. Messages added since the last Commit mean a transaction
// is open, whatever the caller promised, so Idle does nothing then too; but a
// transaction whose Begin arrived and no row yet is invisible here, so the
// caller must not call Idle between a Begin and its Commit.
func (t *Tracker) Idle(walEnd pglogrepl.LSN) {
	t.mu.Lock()
	if t.n == 0 && t.last == t.acked && t.committed == t.last {
		t.advance(walEnd)
	}
	t.mu.Unlock()
}

// Safe returns the end LSN of the newest transaction whose messages, and
// every earlier transaction's, are all acknowledged (or the start LSN, or an
// idle WAL end). It never decreases.
func (t *Tracker) Safe() pglogrepl.LSN {
	return pglogrepl.LSN(t.safe.Load())
}

// InFlight returns the number of messages added but not yet acknowledged.
func (t *Tracker) InFlight() int {
	t.mu.Lock()
	n := t.last - t.acked - t.ahead
	t.mu.Unlock()
	return int(n)
}

// release makes safe every pending transaction whose messages are now all
// acknowledged. Called with mu held.
func (t *Tracker) release() {
	var end pglogrepl.LSN
	for t.n > 0 && t.txns[t.head].last <= t.acked {
		end = max(end, t.txns[t.head].end)
		t.txns[t.head] = pendingTx{}
		t.head = (t.head + 1) & (len(t.txns) - 1)
		t.n--
	}
	t.advance(end)
}

// advance raises safe to lsn; it never lowers it. Called with mu held, so a
// load followed by a store cannot race another writer.
func (t *Tracker) advance(lsn pglogrepl.LSN) {
	if uint64(lsn) > t.safe.Load() {
		t.safe.Store(uint64(lsn))
	}
}

func (t *Tracker) back() *pendingTx {
	return &t.txns[(t.head+t.n-1)&(len(t.txns)-1)]
}

func (t *Tracker) push(p pendingTx) {
	if t.n == len(t.txns) {
		grown := make([]pendingTx, 2*len(t.txns))
		for i := 0; i < t.n; i++ {
			grown[i] = t.txns[(t.head+i)&(len(t.txns)-1)]
		}
		t.txns, t.head = grown, 0
	}
	t.txns[(t.head+t.n)&(len(t.txns)-1)] = p
	t.n++
}

// growBits doubles the ack bitmap until the window (acked, last] fits,
// moving the recorded out-of-order acks to their new positions.
func (t *Tracker) growBits() {
	size := t.mask + 1
	for t.last-t.acked > size {
		size *= 2
	}
	bits := make([]uint64, size/64)
	mask := size - 1
	for s := t.acked + 1; s < t.last; s++ {
		if t.bits[(s&t.mask)>>6]&(1<<(s&63)) != 0 {
			bits[(s&mask)>>6] |= 1 << (s & 63)
		}
	}
	t.bits, t.mask = bits, mask
}
