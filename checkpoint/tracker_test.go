package checkpoint

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pglogrepl"
)

// run applies a space-separated script to t: "add", "commit:END", "ack:SEQ",
// "idle:WALEND" (numbers in decimal). It returns the first Ack error.
func run(tb testing.TB, tr *Tracker, script string) error {
	tb.Helper()
	var firstErr error
	for _, op := range strings.Fields(script) {
		name, arg, _ := strings.Cut(op, ":")
		n, _ := strconv.ParseUint(arg, 10, 64)
		switch name {
		case "add":
			tr.Add()
		case "commit":
			tr.Commit(pglogrepl.LSN(n))
		case "ack":
			if err := tr.Ack(n); err != nil && firstErr == nil {
				firstErr = err
			}
		case "idle":
			tr.Idle(pglogrepl.LSN(n))
		default:
			tb.Fatalf("bad op %q", op)
		}
	}
	return firstErr
}

func TestTracker(t *testing.T) {
	tests := []struct {
		name         string
		start        uint64
		script       string
		want         uint64 // Safe
		wantInFlight int
		wantErr      error
	}{
		{name: "start", start: 7, script: "", want: 7},
		{name: "unacked message holds its transaction", script: "add commit:100", want: 0, wantInFlight: 1},
		{name: "acked transaction is safe", script: "add add commit:100 ack:1 ack:2", want: 100},
		{name: "open transaction is never safe even when acked", script: "add commit:100 ack:1 add ack:2", want: 100},
		{name: "acked but uncommitted transaction is not safe", script: "add add ack:1 ack:2", want: 0},
		{name: "empty transaction with nothing in flight", script: "commit:50", want: 50},
		{name: "empty transaction waits behind unacked one", script: "add commit:100 commit:150", want: 0, wantInFlight: 1},
		{name: "empty transactions coalesce then release", script: "add commit:100 commit:150 commit:160 ack:1", want: 160},
		{name: "later ack does not release earlier transaction", script: "add commit:100 add commit:200 ack:2", want: 0, wantInFlight: 1},
		{name: "out of order acks release both", script: "add commit:100 add commit:200 ack:2 ack:1", want: 200},
		{name: "partial prefix", script: "add commit:100 add commit:200 add commit:300 ack:1 ack:3", want: 100, wantInFlight: 1},
		{name: "gap inside one transaction", script: "add add add commit:100 ack:1 ack:3", want: 0, wantInFlight: 1},
		{name: "duplicate ack is a no-op", script: "add add commit:100 ack:2 ack:2 ack:1 ack:1", want: 100},
		{name: "ack of seq never added", script: "add commit:100 ack:2", want: 0, wantInFlight: 1, wantErr: ErrUnknownSeq},
		{name: "ack of seq zero", script: "add commit:100 ack:0 ack:1", want: 100, wantErr: ErrUnknownSeq},
		{name: "idle with nothing in flight", start: 10, script: "idle:500", want: 500},
		{name: "idle after acked transactions", script: "add commit:100 ack:1 idle:500", want: 500},
		{name: "idle while a message is unacked", script: "add commit:100 idle:500", want: 0, wantInFlight: 1},
		{name: "idle while a transaction is open", script: "add commit:100 ack:1 add ack:2 idle:500", want: 100},
		{name: "idle never lowers safe", start: 900, script: "idle:500", want: 900},
		{name: "commit never lowers safe", start: 900, script: "add commit:100 ack:1", want: 900},
		{name: "transaction before start stays at start", start: 900, script: "commit:100", want: 900},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(pglogrepl.LSN(tt.start))
			err := run(t, tr, tt.script)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Ack error = %v, want %v", err, tt.wantErr)
			}
			if got := uint64(tr.Safe()); got != tt.want {
				t.Errorf("Safe() = %d, want %d", got, tt.want)
			}
			if got := tr.InFlight(); got != tt.wantInFlight {
				t.Errorf("InFlight() = %d, want %d", got, tt.wantInFlight)
			}
		})
	}
}

func TestTrackerAddSequence(t *testing.T) {
	tr := NewTracker(0)
	for want := uint64(1); want <= 3000; want++ {
		if got := tr.Add(); got != want {
			t.Fatalf("Add() = %d, want %d", got, want)
		}
	}
	if got := tr.InFlight(); got != 3000 {
		t.Fatalf("InFlight() = %d, want 3000", got)
	}
}

// model is the obvious definition of the safe LSN: the newest committed
// transaction such that every message up to its last one is acknowledged.
type model struct {
	safe     pglogrepl.LSN
	acked    []bool // by seq-1
	prefix   uint64 // acked[0:prefix] are all true
	txLast   []uint64
	txEnd    []pglogrepl.LSN
	added    uint64
	inFlight int
	settled  int // transactions already folded into safe
}

func (m *model) add() uint64 {
	m.added++
	m.inFlight++
	m.acked = append(m.acked, false)
	return m.added
}

func (m *model) commit(end pglogrepl.LSN) {
	m.txLast = append(m.txLast, m.added)
	m.txEnd = append(m.txEnd, end)
	m.settle()
}

func (m *model) ack(seq uint64) {
	m.acked[seq-1] = true
	m.inFlight--
	m.settle()
}

func (m *model) allAckedThrough(seq uint64) bool {
	for m.prefix < m.added && m.acked[m.prefix] {
		m.prefix++
	}
	return seq <= m.prefix
}

func (m *model) settle() {
	for m.settled < len(m.txEnd) && m.allAckedThrough(m.txLast[m.settled]) {
		m.safe = max(m.safe, m.txEnd[m.settled])
		m.settled++
	}
}

func (m *model) idle(walEnd pglogrepl.LSN) {
	committed := uint64(0)
	if len(m.txLast) > 0 {
		committed = m.txLast[len(m.txLast)-1]
	}
	if m.allAckedThrough(m.added) && committed == m.added {
		m.safe = max(m.safe, walEnd)
	}
}

func TestTrackerMatchesModel(t *testing.T) {
	var maxInFlight, maxPending int
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x0b0d))
		start := pglogrepl.LSN(rng.IntN(1000))
		tr, m := NewTracker(start), &model{safe: start}
		lsn := start
		var unacked []uint64
		// Some seeds hold many messages back to push the ack window and the
		// transaction ring past their initial sizes.
		holdBack, steps := 8, 3000
		if seed%4 == 0 {
			holdBack, steps = 2500, 12000
		}
		for step := 0; step < steps; step++ {
			var op string
			switch r := rng.IntN(100); {
			case r < 40:
				op = "add"
				seq, want := tr.Add(), m.add()
				if seq != want {
					t.Fatalf("seed %d step %d: Add() = %d, want %d", seed, step, seq, want)
				}
				unacked = append(unacked, seq)
			case r < 55:
				op = "commit"
				lsn += pglogrepl.LSN(rng.IntN(100)) // equal ends happen with empty WAL between
				tr.Commit(lsn)
				m.commit(lsn)
			case r < 90:
				op = "ack"
				if len(unacked) == 0 || (len(unacked) < holdBack && rng.IntN(4) != 0) {
					continue
				}
				i := rng.IntN(len(unacked))
				if rng.IntN(3) == 0 {
					i = 0 // mostly in order, as JetStream delivers
				}
				seq := unacked[i]
				unacked = append(unacked[:i], unacked[i+1:]...)
				if err := tr.Ack(seq); err != nil {
					t.Fatalf("seed %d step %d: Ack(%d): %v", seed, step, seq, err)
				}
				m.ack(seq)
			case r < 95:
				op = "dup-ack"
				if m.added == 0 {
					continue
				}
				seq := uint64(rng.IntN(int(m.added))) + 1
				if !m.acked[seq-1] {
					continue
				}
				if err := tr.Ack(seq); err != nil {
					t.Fatalf("seed %d step %d: duplicate Ack(%d): %v", seed, step, seq, err)
				}
			case r < 97:
				op = "unknown-ack"
				if err := tr.Ack(m.added + 1 + uint64(rng.IntN(3))); !errors.Is(err, ErrUnknownSeq) {
					t.Fatalf("seed %d step %d: Ack of unknown seq: err = %v, want ErrUnknownSeq", seed, step, err)
				}
			default:
				op = "idle"
				lsn += pglogrepl.LSN(rng.IntN(100))
				tr.Idle(lsn)
				m.idle(lsn)
			}
			if got, want := tr.Safe(), m.safe; got != want {
				t.Fatalf("seed %d step %d (%s): Safe() = %s, model %s", seed, step, op, got, want)
			}
			if got, want := tr.InFlight(), m.inFlight; got != want {
				t.Fatalf("seed %d step %d (%s): InFlight() = %d, model %d", seed, step, op, got, want)
			}
			maxInFlight, maxPending = max(maxInFlight, m.inFlight), max(maxPending, tr.n)
		}
	}
	// The model comparison only proves something about growth if it happened.
	if maxInFlight <= initialAckBits || maxPending <= initialTxns {
		t.Errorf("max in flight %d, max pending transactions %d: want above %d and %d so that growth is tested",
			maxInFlight, maxPending, initialAckBits, initialTxns)
	}
}

// TestTrackerConcurrent runs the producer, the acker and readers on their own
// goroutines, as outboxd does, for the race detector and for monotonicity.
func TestTrackerConcurrent(t *testing.T) {
	const txs, perTx = 2000, 5
	tr := NewTracker(0)
	seqs := make(chan uint64, 512)
	done := make(chan struct{})
	var wg sync.WaitGroup

	wg.Go(func() { // producer
		defer close(seqs)
		for i := 1; i <= txs; i++ {
			for j := 0; j < i%perTx; j++ { // some transactions are empty
				seqs <- tr.Add()
			}
			tr.Commit(pglogrepl.LSN(i * 10))
		}
	})
	wg.Go(func() { // acker: swaps neighbours to ack out of order
		var held uint64
		for seq := range seqs {
			if held == 0 && seq%3 == 0 {
				held = seq
				continue
			}
			if err := tr.Ack(seq); err != nil {
				t.Errorf("Ack(%d): %v", seq, err)
			}
			if held != 0 {
				if err := tr.Ack(held); err != nil {
					t.Errorf("Ack(%d): %v", held, err)
				}
				held = 0
			}
		}
		if held != 0 {
			if err := tr.Ack(held); err != nil {
				t.Errorf("Ack(%d): %v", held, err)
			}
		}
	})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			var prev pglogrepl.LSN
			for {
				select {
				case <-done:
					return
				default:
				}
				s := tr.Safe()
				if s < prev {
					t.Errorf("Safe() went back from %s to %s", prev, s)
					return
				}
				prev = s
				_ = tr.InFlight()
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	if got, want := tr.Safe(), pglogrepl.LSN(txs*10); got != want {
		t.Errorf("final Safe() = %s, want %s", got, want)
	}
	if got := tr.InFlight(); got != 0 {
		t.Errorf("final InFlight() = %d, want 0", got)
	}
}

func TestTrackerSteadyStateDoesNotAllocate(t *testing.T) {
	tr := NewTracker(0)
	var lsn pglogrepl.LSN
	window := make([]uint64, 0, 100)
	cycle := func() {
		for range 10 {
			window = append(window, tr.Add())
		}
		lsn += 10
		tr.Commit(lsn)
		// Ack the oldest transaction's messages, reversed, once the window
		// is full: out-of-order acks with others still in flight.
		if len(window) == cap(window) {
			for i := 9; i >= 0; i-- {
				if err := tr.Ack(window[i]); err != nil {
					t.Fatal(err)
				}
			}
			window = append(window[:0], window[10:]...)
		}
	}
	for range 100 { // warm up to the window size
		cycle()
	}
	if allocs := testing.AllocsPerRun(1000, cycle); allocs != 0 {
		t.Errorf("steady-state cycle allocates %.1f times, want 0", allocs)
	}
}

// BenchmarkTracker measures one message's way through the tracker: Add,
// Commit of its transaction, and Ack.
func BenchmarkTracker(b *testing.B) {
	b.Run("tx=1msg/in-order", func(b *testing.B) {
		tr := NewTracker(0)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			seq := tr.Add()
			tr.Commit(pglogrepl.LSN(i))
			if err := tr.Ack(seq); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tx=1msg/window=1024", func(b *testing.B) {
		tr := NewTracker(0)
		const window = 1024
		for i := range window {
			tr.Add()
			tr.Commit(pglogrepl.LSN(i))
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			seq := tr.Add()
			tr.Commit(pglogrepl.LSN(window + i))
			if err := tr.Ack(seq - window); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tx=10msg/window=1000/reordered", func(b *testing.B) {
		// Reports InFlight as a metric: it must stay at the window, or the
		// benchmark is measuring growth, not the steady state.
		tr := NewTracker(0)
		const window = 1000
		for i := range window {
			tr.Add()
			if i%10 == 9 {
				tr.Commit(pglogrepl.LSN(i))
			}
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			seq := tr.Add()
			if i%10 == 9 {
				tr.Commit(pglogrepl.LSN(window + i))
			}
			old := seq - window
			if err := tr.Ack((old - 1) ^ 1 + 1); err != nil { // pairs acked swapped: 2, 1, 4, 3, ...
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(tr.InFlight()), "inflight")
	})
}

func BenchmarkTrackerSafe(b *testing.B) {
	tr := NewTracker(0)
	b.ReportAllocs()
	for b.Loop() {
		_ = tr.Safe()
	}
}
