package replication

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

func TestSlotOptions(t *testing.T) {
	tests := []struct {
		major    int
		snapshot string
		failover bool
		want     string
	}{
		{14, "nothing", true, "NOEXPORT_SNAPSHOT"},
		{14, "export", false, "EXPORT_SNAPSHOT"},
		{16, "export", true, "(SNAPSHOT 'export')"},
		{17, "nothing", false, "(SNAPSHOT 'nothing')"},
		{17, "nothing", true, "(SNAPSHOT 'nothing', FAILOVER true)"},
		{18, "export", true, "(SNAPSHOT 'export', FAILOVER true)"},
	}
	for _, tt := range tests {
		if got := slotOptions(tt.major, tt.snapshot, tt.failover); got != tt.want {
			t.Errorf("slotOptions(%d, %q, %v) = %q, want %q", tt.major, tt.snapshot, tt.failover, got, tt.want)
		}
	}
}

func TestParseTimelineHistory(t *testing.T) {
	got, err := ParseTimelineHistory([]byte("1\t0/3000160\tno recovery target specified\n\n# a comment\n2\t0/5A000A0\tbefore 2026-12-06\n"))
	want := []TimelineSwitch{{Timeline: 1, End: 0x3000160}, {Timeline: 2, End: 0x5A000A0}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseTimelineHistory = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"1\n", "x\t0/1\treason\n", "0\t0/1\n", "1\tnot-an-lsn\n"} {
		if got, err := ParseTimelineHistory([]byte(bad)); err == nil {
			t.Errorf("ParseTimelineHistory(%q) = %v, want an error", bad, got)
		}
	}
}

func TestFailoverProblems(t *testing.T) {
	healthy := StandbySlot{Name: "standby1", Exists: true, Active: true, Feedback: true}
	tests := []struct {
		name  string
		setup FailoverSetup
		want  bool
		found []string // one problem each, in order
	}{
		{name: "sound", want: true, setup: FailoverSetup{Major: 17, SlotFailover: true, StandbySlots: []string{"standby1"}, Standbys: []StandbySlot{healthy}, PhysicalSlots: 1}},
		{name: "PostgreSQL 16", want: true, setup: FailoverSetup{Major: 16, PhysicalSlots: 1}},
		{name: "not asked for", setup: FailoverSetup{Major: 17, PhysicalSlots: 1}},
		{name: "no standby", want: true, setup: FailoverSetup{Major: 17}},
		{name: "no synchronized_standby_slots", want: true, setup: FailoverSetup{Major: 17, SlotFailover: true, PhysicalSlots: 1},
			found: []string{"synchronized_standby_slots is empty"}},
		{name: "slot not a failover slot", want: true,
			setup: FailoverSetup{Major: 18, StandbySlots: []string{"standby1"}, Standbys: []StandbySlot{healthy}, PhysicalSlots: 1},
			found: []string{`replication slot "outboxd" is not a failover slot`}},
		{name: "standby slot missing, one down, one without feedback", want: true,
			setup: FailoverSetup{Major: 17, SlotFailover: true, StandbySlots: []string{"a", "b", "c"},
				Standbys: []StandbySlot{{Name: "a"}, {Name: "b", Exists: true}, {Name: "c", Exists: true, Active: true}}},
			found: []string{`names "a", which is not a physical slot`, `physical slot "b" is not connected`, `"c" sends no hot standby feedback`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.setup.Problems("outboxd", tt.want)
			if len(got) != len(tt.found) {
				t.Fatalf("Problems = %q, want %d", got, len(tt.found))
			}
			for i, want := range tt.found {
				if !strings.Contains(got[i], want) || !strings.Contains(got[i], "fix") {
					t.Errorf("problem %d = %q, want it to say %q and the fix", i, got[i], want)
				}
			}
		})
	}
}

// TestFailoverSlotCreated: with Failover, CreateSlot makes a failover slot
// on PostgreSQL 17+ (and an ordinary one on older servers, where the
// option does not exist); MakeFailoverSlot turns an ordinary slot into
// one; InspectFailover reads both and the primary's standby set-up.
func TestFailoverSlotCreated(t *testing.T) {
	dsn, conn := pgtest.Shared(t).MigratedDatabase(t)
	ctx := context.Background()
	dropAfter := func(slot string) {
		t.Cleanup(func() {
			conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1", slot) //nolint:errcheck
		})
	}
	asked, plain := uniqueSlot(), uniqueSlot()
	for _, slot := range []string{asked, plain} {
		if _, err := CreateSlot(ctx, Config{ConnString: dsn, Slot: slot, Failover: slot == asked}); err != nil {
			t.Fatal(err)
		}
		dropAfter(slot)
	}
	setup, err := InspectFailover(ctx, conn, asked)
	if err != nil {
		t.Fatal(err)
	}
	if setup.Major < FailoverSlotsMajor {
		if setup.SlotFailover || setup.Problems(asked, true) != nil {
			t.Errorf("PostgreSQL %d: InspectFailover = %+v, want nothing to report", setup.Major, setup)
		}
		return // nothing more exists to test on this server; scripts/test-versions runs the rest on 17 and 18
	}
	if !setup.SlotFailover {
		t.Errorf("CreateSlot with Failover made slot %q without failover", asked)
	}
	if problems := setup.Problems(asked, true); setup.PhysicalSlots != 0 || len(problems) != 0 {
		t.Errorf("a server without standbys: %d physical slots, Problems = %q; want none", setup.PhysicalSlots, problems)
	}
	if setup, err = InspectFailover(ctx, conn, plain); err != nil || setup.SlotFailover {
		t.Fatalf("slot %q created without Failover: InspectFailover = %+v, %v; want no failover", plain, setup, err)
	}
	stream, err := Connect(ctx, Config{ConnString: dsn, Slot: plain})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close(ctx) //nolint:errcheck
	if err := stream.MakeFailoverSlot(ctx); err != nil {
		t.Fatal(err)
	}
	if setup, err = InspectFailover(ctx, conn, plain); err != nil || !setup.SlotFailover {
		t.Errorf("after MakeFailoverSlot: InspectFailover = %+v, %v; want a failover slot", setup, err)
	}
}

func TestStandbyProblems(t *testing.T) {
	sound := StandbySetup{InRecovery: true, SyncSlots: "on", Feedback: "on", PrimarySlot: "standby1", Synced: true}
	tests := []struct {
		name  string
		setup StandbySetup
		found []string
	}{
		{name: "sound", setup: sound},
		{name: "a primary", setup: StandbySetup{}},
		{name: "PostgreSQL 16 standby", setup: StandbySetup{InRecovery: true, Feedback: "on", PrimarySlot: "standby1"},
			found: []string{"sync_replication_slots off"}},
		{name: "everything missing", setup: StandbySetup{InRecovery: true, SyncSlots: "off", Feedback: "off"},
			found: []string{"sync_replication_slots off", "hot_standby_feedback off", `physical slot ""`}},
		{name: "slot not named on the primary", setup: StandbySetup{InRecovery: true, SyncSlots: "on", Feedback: "on", PrimarySlot: "other"},
			found: []string{`physical slot "other", which synchronized_standby_slots on the primary does not name`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.setup.Problems("db2:5432", []string{"standby1"})
			if len(got) != len(tt.found) {
				t.Fatalf("Problems = %q, want %d", got, len(tt.found))
			}
			for i, want := range tt.found {
				if !strings.Contains(got[i], want) || !strings.Contains(got[i], "standby db2:5432") || !strings.Contains(got[i], "fix") {
					t.Errorf("problem %d = %q, want it to name the standby, say %q and the fix", i, got[i], want)
				}
			}
		})
	}
}
