package checkpoint

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// fakeStore is an in-memory Store whose Save can be made to fail or block.
type fakeStore struct {
	mu       sync.Mutex
	cp       Checkpoint
	has      bool
	failures int  // fail this many more Saves with errSave
	calls    int  // Save calls
	block    bool // Save waits for ctx to be done
}

var errSave = errors.New("disk on fire")

func (s *fakeStore) Load(context.Context) (Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.has {
		return Checkpoint{}, ErrNotFound
	}
	return s.cp, nil
}

func (s *fakeStore) DeleteCommand() string { return "forget fake" }

func (s *fakeStore) Save(ctx context.Context, cp Checkpoint) error {
	s.mu.Lock()
	s.calls++
	block := s.block
	if s.failures > 0 {
		s.failures--
		s.mu.Unlock()
		return errSave
	}
	s.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	s.mu.Lock()
	s.cp, s.has = cp, true
	s.mu.Unlock()
	return nil
}

func (s *fakeStore) String() string { return "fake" }

// stored returns the LSN the store holds (0 when none).
func (s *fakeStore) stored() pglogrepl.LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cp.LSN
}

func (s *fakeStore) set(f func(*fakeStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *fakeStore) saveCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

var testIdentity = Checkpoint{SystemID: "7351234567890123456", Timeline: 1, Slot: "outboxd"}

// safeAt returns a tracker whose Safe is lsn, reached through a committed
// and acknowledged transaction.
func safeAt(tb testing.TB, tr *Tracker, lsn pglogrepl.LSN) {
	tb.Helper()
	seq := tr.Add()
	tr.Commit(lsn)
	if err := tr.Ack(seq); err != nil {
		tb.Fatal(err)
	}
	if tr.Safe() != lsn {
		tb.Fatalf("tracker Safe = %s, want %s", tr.Safe(), lsn)
	}
}

func TestCheckpointerFlushDurableWaitsForSave(t *testing.T) {
	ctx := context.Background()
	store := &fakeStore{failures: 2}
	tr := NewTracker(50)
	c := NewCheckpointer(CheckpointerConfig{Store: store, Tracker: tr, Identity: testIdentity, Start: 50})
	if got := c.Durable(); got != 50 {
		t.Fatalf("Durable at start = %s, want 0/32", got)
	}
	if err := c.Flush(ctx); err != nil || store.saveCalls() != 0 {
		t.Fatalf("Flush with nothing new: err %v, %d saves; want nil, 0", err, store.saveCalls())
	}

	safeAt(t, tr, 100)
	for range 2 {
		err := c.Flush(ctx)
		if !errors.Is(err, errSave) || !strings.Contains(err.Error(), "0/64") {
			t.Fatalf("Flush with failing store: err = %v, want errSave naming lsn 0/64", err)
		}
		if got := c.Durable(); got != 50 {
			t.Fatalf("Durable after failed save = %s, want 0/32 (unchanged)", got)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := c.Durable(); got != 100 {
		t.Errorf("Durable after save = %s, want 0/64", got)
	}
	got, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.LSN != 100 || got.SystemID != testIdentity.SystemID || got.Timeline != 1 || got.Slot != "outboxd" ||
		time.Since(got.SavedAt) > time.Minute || got.SavedAt.Location() != time.UTC {
		t.Errorf("saved %+v, want LSN 0/64 with the identity and a current UTC SavedAt", got)
	}
	calls := store.saveCalls()
	if err := c.Flush(ctx); err != nil || store.saveCalls() != calls {
		t.Errorf("Flush again: err %v, saves %d -> %d; want no new save", err, calls, store.saveCalls())
	}
}

func TestCheckpointerRunRetriesAndLogsOnce(t *testing.T) {
	store := &fakeStore{failures: 5}
	tr := NewTracker(0)
	var logs testsync.Buffer
	c := NewCheckpointer(CheckpointerConfig{
		Store: store, Tracker: tr, Identity: testIdentity,
		Interval: time.Millisecond, Logger: zerolog.New(&logs).Level(zerolog.InfoLevel),
	})
	safeAt(t, tr, 100)

	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()

	// Durable must never be ahead of the store: read Durable first, then the
	// store, and the store must hold at least as much.
	deadline := time.Now().Add(10 * time.Second)
	for c.Durable() != 100 {
		d := c.Durable()
		if s := store.stored(); d > s {
			t.Fatalf("Durable %s is ahead of the store's %s", d, s)
		}
		if time.Now().After(deadline) {
			t.Fatalf("Durable = %s after 10s, want 0/64", c.Durable())
		}
		time.Sleep(100 * time.Microsecond)
	}
	if store.stored() != 100 {
		t.Fatalf("store holds %s, want 0/64", store.stored())
	}
	safeAt(t, tr, 200)
	for c.Durable() != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("Durable = %s after 10s, want 0/C8", c.Durable())
		}
		time.Sleep(100 * time.Microsecond)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("Run = %v, want nil after cancel", err)
	}
	if calls := store.saveCalls(); calls != 7 {
		t.Errorf("%d saves, want 7 (5 failures, 2 successes: no save when nothing is new)", calls)
	}

	out := logs.String()
	if n := strings.Count(out, "checkpoint save failed"); n != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "checkpoint save recovered"); n != 1 {
		t.Errorf("recovery logged %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{`"component":"checkpoint"`, `"store":"fake"`, `"failed_attempts":5`, "disk on fire"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %s:\n%s", want, out)
		}
	}
}

func TestCheckpointerRunStopsDuringBlockedSave(t *testing.T) {
	store := &fakeStore{block: true}
	tr := NewTracker(0)
	var logs testsync.Buffer
	c := NewCheckpointer(CheckpointerConfig{
		Store: store, Tracker: tr, Identity: testIdentity, Interval: time.Millisecond, Logger: zerolog.New(&logs),
	})
	safeAt(t, tr, 100)
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	for store.saveCalls() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if c.Durable() != 0 {
		t.Errorf("Durable = %s after a save that never finished, want 0/0", c.Durable())
	}
	if strings.Contains(logs.String(), "failed") {
		t.Errorf("shutdown logged as a failure:\n%s", logs.String())
	}
}

func TestCheckpointerWithFileStore(t *testing.T) {
	ctx := context.Background()
	store := NewFileStore(filepath.Join(t.TempDir(), "cp.json"))
	tr := NewTracker(0)
	c := NewCheckpointer(CheckpointerConfig{Store: store, Tracker: tr, Identity: testIdentity})
	safeAt(t, tr, 0x1_00000010)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.LSN != c.Durable() || got.LSN.String() != "1/10" {
		t.Errorf("stored LSN %s, Durable %s; want both 1/10", got.LSN, c.Durable())
	}
	if err := got.Matches(testIdentity.SystemID, testIdentity.Timeline, testIdentity.Slot); err != nil {
		t.Errorf("saved checkpoint does not match the identity: %v", err)
	}
}

func TestCheckpointerConfigValidate(t *testing.T) {
	valid := CheckpointerConfig{Store: &fakeStore{}, Tracker: NewTracker(0), Identity: testIdentity}
	tests := []struct {
		name    string
		change  func(*CheckpointerConfig)
		wantErr string
	}{
		{name: "valid", change: func(*CheckpointerConfig) {}},
		{name: "no store", change: func(c *CheckpointerConfig) { c.Store = nil }, wantErr: "store is required"},
		{name: "no tracker", change: func(c *CheckpointerConfig) { c.Tracker = nil }, wantErr: "tracker is required"},
		{name: "no system id", change: func(c *CheckpointerConfig) { c.Identity.SystemID = "" }, wantErr: "system_id"},
		{name: "no timeline", change: func(c *CheckpointerConfig) { c.Identity.Timeline = 0 }, wantErr: "timeline 0: must be >= 1"},
		{name: "no slot", change: func(c *CheckpointerConfig) { c.Identity.Slot = "" }, wantErr: "slot is required"},
		{name: "negative interval", change: func(c *CheckpointerConfig) { c.Interval = -time.Second }, wantErr: "checkpoint interval -1s: must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.change(&cfg)
			err := cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "BUG: ") {
			t.Errorf("NewCheckpointer(invalid) recovered %v, want a BUG: panic", r)
		}
	}()
	NewCheckpointer(CheckpointerConfig{})
}
