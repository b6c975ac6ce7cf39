package relay

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/replication"
)

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1536, "1.5 KiB (1536 bytes)"},
		{5 << 20, "5.0 MiB (5242880 bytes)"},
		{3 << 30, "3.0 GiB (3221225472 bytes)"},
	}
	for _, tt := range tests {
		if got := humanBytes(tt.n); got != tt.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestDerivedWarnings: each warning appears when its condition holds and
// not otherwise.
func TestDerivedWarnings(t *testing.T) {
	healthy := func() StatusReport {
		info := replication.SlotInfo{Name: "outboxd", Type: "logical", Plugin: "pgoutput", Database: "app", ConnectedDatabase: "app",
			WALStatus: "reserved", ConfirmedFlush: 0x2000, Restart: 0x1000, CurrentWAL: 0x3000, RetainedBytes: 0x2000, LagBytes: 0x1000}
		return StatusReport{
			Slot:        NewSlotReport(info),
			Publication: PublicationReport{Name: "outboxd", presence: presence{Exists: true}, PublishesInsert: true, HoldsTable: true},
			Stream:      StreamReport{Name: "OUTBOX", presence: presence{Exists: true}},
			Checkpoint:  CheckpointReport{Store: "kv:outboxd/outboxd", presence: presence{Exists: true}, Slot: "outboxd", LSN: "0/2000", lsn: 0x2000},
		}
	}
	const limit = 1 << 20
	tests := []struct {
		name   string
		change func(r *StatusReport)
		want   []string // codes
	}{
		{"healthy", func(*StatusReport) {}, nil},
		{"inactive slot over the limit", func(r *StatusReport) { r.Slot.RetainedWALBytes = limit + 1 }, []string{"slot_inactive_retaining_wal"}},
		{"inactive slot at the limit", func(r *StatusReport) { r.Slot.RetainedWALBytes = limit }, nil},
		{"active slot over the limit", func(r *StatusReport) { r.Slot.RetainedWALBytes, r.Slot.Active = 10*limit, true }, nil},
		{"checkpoint behind slot", func(r *StatusReport) { r.Checkpoint.lsn = 0x1fff }, []string{"checkpoint_behind_slot"}},
		{"checkpoint ahead of slot", func(r *StatusReport) { r.Checkpoint.lsn = 0x2500 }, nil},
		{"checkpoint of another slot", func(r *StatusReport) { r.Checkpoint.Slot = "other" }, []string{"checkpoint_other_slot"}},
		{"no checkpoint yet", func(r *StatusReport) { r.Checkpoint.presence = presence{Problem: "none saved yet"} }, nil},
		{"checkpoint unreadable", func(r *StatusReport) { r.Checkpoint.presence = presence{Problem: "cannot read", unreadable: true} }, []string{"checkpoint_unreadable"}},
		{"slot of another plugin", func(r *StatusReport) { r.Slot.info.Plugin = "wal2json" }, []string{"slot_unusable"}},
		{"slot lost", func(r *StatusReport) { r.Slot.info.WALStatus = "lost" }, []string{"slot_unusable"}},
		{"slot unreserved", func(r *StatusReport) { r.Slot.WALStatus = "unreserved" }, []string{"slot_wal_at_risk"}},
		{"slot missing", func(r *StatusReport) {
			r.Slot = SlotReport{Name: "outboxd", presence: presence{Problem: "does not exist"}}
		}, []string{"slot_missing"}},
		{"postgres down", func(r *StatusReport) {
			r.Slot.presence = presence{Problem: "cannot read", unreadable: true}
			r.Publication.presence = r.Slot.presence
		}, []string{"slot_unreadable", "publication_unreadable"}},
		{"publication missing", func(r *StatusReport) { r.Publication.presence = presence{Problem: "does not exist"} }, []string{"publication_missing"}},
		{"publication without the table", func(r *StatusReport) { r.Publication.HoldsTable = false }, []string{"publication_lacks_table"}},
		{"stream missing", func(r *StatusReport) { r.Stream.presence = presence{Problem: "does not exist"} }, []string{"stream_missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := healthy()
			tt.change(&r)
			var got []string
			for _, w := range derivedWarnings(r, limit) {
				got = append(got, w.Code)
				if w.Message == "" {
					t.Errorf("warning %s has no message", w.Code)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("warnings %q, want %q", got, tt.want)
			}
		})
	}
}
