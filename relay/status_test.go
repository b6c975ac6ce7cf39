package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/checkpoint"
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
// not otherwise, blocking outboxd run exactly when run would not relay.
func TestDerivedWarnings(t *testing.T) {
	store := checkpoint.NewFileStore(healthyStore)
	noCheckpoint := func(r *StatusReport) {
		r.Checkpoint = CheckpointReport{Store: store.String(), presence: presence{Problem: "none saved yet"}}
	}
	const limit = 1 << 20
	tests := []struct {
		name   string
		cfg    Config
		change func(r *StatusReport)
		want   []string // "blocks CODE" or "warns CODE"
	}{
		{"healthy", Config{}, func(*StatusReport) {}, nil},
		{"wal_level replica", Config{}, func(r *StatusReport) { r.Server.WALLevel = "replica" }, []string{"blocks wal_level_not_logical"}},
		{"server unreadable", Config{}, func(r *StatusReport) {
			r.Server.presence = presence{Problem: "cannot read", unreadable: true}
		}, []string{"blocks server_unreadable"}},
		{"inactive slot over the limit", Config{}, func(r *StatusReport) { r.Slot.RetainedWALBytes = limit + 1 }, []string{"warns slot_inactive_retaining_wal"}},
		{"inactive slot at the limit", Config{}, func(r *StatusReport) { r.Slot.RetainedWALBytes = limit }, nil},
		{"active slot over the limit", Config{}, func(r *StatusReport) { r.Slot.RetainedWALBytes, r.Slot.Active = 10*limit, true }, nil},
		{"checkpoint behind slot", Config{}, func(r *StatusReport) { r.Checkpoint.lsn = 0x1fff }, []string{"blocks checkpoint_behind_slot"}},
		{"checkpoint behind slot, --allow-gap", Config{AllowGap: true}, func(r *StatusReport) { r.Checkpoint.lsn = 0x1fff }, []string{"warns checkpoint_behind_slot"}},
		{"checkpoint ahead of slot", Config{}, func(r *StatusReport) { r.Checkpoint.lsn = 0x2500 }, nil},
		{"checkpoint of another slot", Config{}, func(r *StatusReport) { r.Checkpoint.Slot = "other" }, []string{"blocks checkpoint_other_slot"}},
		{"checkpoint of another cluster", Config{AllowGap: true}, func(r *StatusReport) {
			r.Checkpoint.SystemID, r.Checkpoint.saved.LSN, r.Checkpoint.lsn = "7000000000000000002", 0x9000, 0x9000
		}, []string{"blocks checkpoint_other_cluster"}},
		{"checkpoint of a later timeline", Config{}, func(r *StatusReport) { r.Checkpoint.Timeline = 2 }, []string{"blocks checkpoint_other_timeline"}},
		{"checkpoint of an earlier timeline", Config{}, func(r *StatusReport) { r.Server.Timeline, r.Checkpoint.Timeline = 2, 1 }, []string{"warns checkpoint_other_timeline"}},
		{"checkpoint of an earlier timeline, slot left behind", Config{}, func(r *StatusReport) {
			r.Server.Timeline, r.Checkpoint.Timeline = 2, 1
			r.Slot = SlotReport{Name: "outboxd", presence: presence{Problem: "does not exist"}}
		}, []string{"warns slot_missing", "blocks checkpoint_other_timeline"}},
		{"failover set-up without synchronized_standby_slots", Config{SlotFailover: true}, func(r *StatusReport) {
			r.failover = replication.FailoverSetup{Major: 17, SlotFailover: true, PhysicalSlots: 1}
		}, []string{"warns failover_setup"}},
		{"a standby without sync_replication_slots", Config{SlotFailover: true}, func(r *StatusReport) {
			r.standbyProblems = []string{"standby db2:5432 has sync_replication_slots off"}
		}, []string{"warns failover_setup"}},
		{"failover slots not asked for", Config{}, func(r *StatusReport) {
			r.failover = replication.FailoverSetup{Major: 17, PhysicalSlots: 1}
		}, nil},
		{"timeline not read on a standby", Config{}, func(r *StatusReport) { r.Server.Timeline = 0 }, nil},
		{"checkpoint past the server's WAL", Config{}, func(r *StatusReport) { r.Checkpoint.saved.LSN, r.Checkpoint.lsn = 0x3001, 0x3001 }, []string{"blocks checkpoint_past_server_wal"}},
		{"checkpoint past the server's WAL, --allow-gap", Config{AllowGap: true}, func(r *StatusReport) { r.Checkpoint.saved.LSN, r.Checkpoint.lsn = 0x3001, 0x3001 }, []string{"warns checkpoint_past_server_wal"}},
		{"slot past the server's WAL", Config{}, func(r *StatusReport) { noCheckpoint(r); r.Slot.info.ConfirmedFlush = 0x3001 }, []string{"blocks slot_past_server_wal"}},
		{"no checkpoint yet", Config{}, noCheckpoint, nil},
		{"checkpoint unreadable", Config{}, func(r *StatusReport) { r.Checkpoint.presence = presence{Problem: "cannot read", unreadable: true} }, []string{"blocks checkpoint_unreadable"}},
		{"slot of another plugin", Config{}, func(r *StatusReport) { r.Slot.info.Plugin = "wal2json" }, []string{"blocks slot_unusable"}},
		{"slot lost", Config{}, func(r *StatusReport) { r.Slot.info.WALStatus = "lost" }, []string{"blocks slot_unusable"}},
		{"slot unreserved", Config{}, func(r *StatusReport) { r.Slot.WALStatus = "unreserved" }, []string{"warns slot_wal_at_risk"}},
		{"inactive slot, idle timeout", Config{}, func(r *StatusReport) { r.Slot.info.IdleTimeout = time.Hour }, []string{"warns slot_idle_timeout"}},
		{"active slot, idle timeout", Config{}, func(r *StatusReport) { r.Slot.info.IdleTimeout, r.Slot.Active = time.Hour, true }, nil},
		{"slot missing", Config{}, func(r *StatusReport) {
			noCheckpoint(r)
			r.Slot = SlotReport{Name: "outboxd", presence: presence{Problem: "does not exist"}}
		}, []string{"warns slot_missing"}},
		{"slot missing with a checkpoint", Config{}, func(r *StatusReport) {
			r.Slot = SlotReport{Name: "outboxd", presence: presence{Problem: "does not exist"}}
		}, []string{"blocks slot_missing"}},
		{"slot missing with a checkpoint, --allow-gap", Config{AllowGap: true}, func(r *StatusReport) {
			r.Slot = SlotReport{Name: "outboxd", presence: presence{Problem: "does not exist"}}
		}, []string{"warns slot_missing"}},
		{"postgres down", Config{}, func(r *StatusReport) {
			r.Slot.presence = presence{Problem: "cannot read", unreadable: true}
			r.Publication.presence, r.Server.presence = r.Slot.presence, r.Slot.presence
		}, []string{"blocks slot_unreadable", "blocks publication_unreadable"}},
		{"publication missing", Config{}, func(r *StatusReport) { r.Publication.presence = presence{Problem: "does not exist"} }, []string{"blocks publication_missing"}},
		{"publication without the table", Config{}, func(r *StatusReport) { r.Publication.HoldsTable = false }, []string{"blocks publication_lacks_table"}},
		{"stream missing", Config{}, func(r *StatusReport) { r.Stream.presence = presence{Problem: "does not exist"} }, []string{"blocks stream_missing"}},
		{"stream missing, --create-stream", Config{CreateStream: true}, func(r *StatusReport) { r.Stream.presence = presence{Problem: "does not exist"} }, []string{"warns stream_missing"}},
		{"nats down", Config{}, func(r *StatusReport) {
			r.Stream.presence = presence{Problem: "cannot read", unreadable: true}
			r.Checkpoint.presence = r.Stream.presence
		}, []string{"blocks stream_unreadable", "blocks checkpoint_unreadable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := healthyReport()
			tt.change(&r)
			var got []string
			for _, w := range derivedWarnings(r, tt.cfg, limit) {
				verb := "warns"
				if w.BlocksRun {
					verb = "blocks"
				}
				got = append(got, verb+" "+w.Code)
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

// healthyStore is the checkpoint file of healthyReport.
const healthyStore = "/var/lib/outboxd/checkpoint.json"

// healthyReport is a report with nothing to warn of: a slot, publication
// and stream in order, and a checkpoint of this server and slot at the
// slot's position.
func healthyReport() StatusReport {
	store := checkpoint.NewFileStore(healthyStore)
	info := replication.SlotInfo{Name: "outboxd", Type: "logical", Plugin: "pgoutput", Database: "app", ConnectedDatabase: "app",
		WALStatus: "reserved", ConfirmedFlush: 0x2000, Restart: 0x1000, CurrentWAL: 0x3000, RetainedBytes: 0x2000, LagBytes: 0x1000}
	saved := checkpoint.Checkpoint{LSN: 0x2000, SystemID: "7000000000000000001", Timeline: 1, Slot: "outboxd"}
	return StatusReport{
		Server: ServerReport{presence: presence{Exists: true}, WALLevel: "logical", SystemID: saved.SystemID, Timeline: 1,
			WALFlushLSN: "0/3000", walEnd: 0x3000},
		Slot:        NewSlotReport(info),
		Publication: PublicationReport{Name: "outboxd", presence: presence{Exists: true}, PublishesInsert: true, HoldsTable: true},
		Stream:      StreamReport{Name: "OUTBOX", presence: presence{Exists: true}},
		Checkpoint: CheckpointReport{Store: store.String(), presence: presence{Exists: true}, Slot: "outboxd", LSN: "0/2000",
			SystemID: saved.SystemID, Timeline: 1, lsn: 0x2000, saved: saved, store: store},
	}
}

// TestGapWarningsSayWhatRunDoes: a slot missing while a checkpoint exists,
// or a checkpoint behind the slot, says that run refuses to start, or,
// with --allow-gap, that it starts without the events in the gap.
func TestGapWarningsSayWhatRunDoes(t *testing.T) {
	missing := healthyReport()
	missing.Slot = SlotReport{Name: "outboxd", presence: presence{Problem: "does not exist"}}
	behind := healthyReport()
	behind.Checkpoint.lsn = 0x1fff
	for _, r := range []StatusReport{missing, behind} {
		for allowGap, want := range map[bool]string{false: "outboxd run refuses to start", true: "outboxd run starts anyway (--allow-gap) without them"} {
			warnings := derivedWarnings(r, Config{AllowGap: allowGap}, 1<<20)
			if len(warnings) != 1 || !strings.Contains(warnings[0].Message, want) {
				t.Errorf("with allow-gap %v: warnings %+v, want one saying %q", allowGap, warnings, want)
			}
		}
	}
}
