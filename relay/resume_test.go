package relay

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/replication"
)

// TestDecideResume holds the resume point to docs/design.md invariant 5:
// start from the later of checkpoint and slot; stop, naming the cause and
// the fix, whenever the two cannot both be true, unless --allow-gap.
func TestDecideResume(t *testing.T) {
	const sysID, timeline, slotName = "7300000000000000001", 1, "outboxd"
	saved := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	identity := checkpoint.Checkpoint{SystemID: sysID, Timeline: timeline, Slot: slotName}
	ckpt := func(lsn pglogrepl.LSN) checkpoint.Checkpoint {
		c := identity
		c.LSN, c.SavedAt, c.BeforeSlot = lsn, saved, checkpoint.NoneBeforeSlot
		return c
	}
	slotAt := func(lsn pglogrepl.LSN) replication.SlotState {
		return replication.SlotState{Exists: true, ConfirmedFlush: lsn}
	}
	other := ckpt(0x200)
	other.SystemID = "7300000000000000002"
	unsaved := ckpt(0x200)
	unsaved.SavedAt = time.Time{}

	tests := []struct {
		name       string
		checkpoint *checkpoint.Checkpoint // nil: none saved
		slot       replication.SlotState
		walEnd     pglogrepl.LSN
		allowGap   bool

		wantLSN, wantFrom pglogrepl.LSN
		wantCreate        bool
		wantReplace       bool
		wantCommittedBy   time.Time
		wantBeforeSlot    string
		wantErr           []string // all in the error; it must be Permanent
	}{
		{name: "first start: slot exists, no checkpoint", slot: slotAt(0x100), walEnd: 0x900,
			wantLSN: 0x100, wantFrom: 0x100},
		{name: "first start: no slot", walEnd: 0x900, wantCreate: true},
		{name: "after a crash: checkpoint ahead of the slot", checkpoint: ptr(ckpt(0x200)), slot: slotAt(0x100), walEnd: 0x900,
			wantLSN: 0x200, wantFrom: 0x100, wantCommittedBy: saved.Add(clockSkew), wantBeforeSlot: checkpoint.NoneBeforeSlot},
		{name: "clean stop: checkpoint at the slot", checkpoint: ptr(ckpt(0x200)), slot: slotAt(0x200), walEnd: 0x900,
			wantLSN: 0x200, wantFrom: 0x200, wantCommittedBy: saved.Add(clockSkew), wantBeforeSlot: checkpoint.NoneBeforeSlot},
		{name: "checkpoint without a save time", checkpoint: ptr(unsaved), slot: slotAt(0x100), walEnd: 0x900,
			wantLSN: 0x200, wantFrom: 0x100, wantBeforeSlot: checkpoint.NoneBeforeSlot},
		{name: "slot ahead of the checkpoint", checkpoint: ptr(ckpt(0x100)), slot: slotAt(0x200), walEnd: 0x900,
			wantErr: []string{`replication slot "outboxd" is at 0/200, ahead of checkpoint`, "--allow-gap"}},
		{name: "slot ahead of the checkpoint, --allow-gap", checkpoint: ptr(ckpt(0x100)), slot: slotAt(0x200), walEnd: 0x900, allowGap: true,
			wantLSN: 0x200, wantFrom: 0x200, wantReplace: true, wantBeforeSlot: checkpoint.NoneBeforeSlot},
		{name: "slot dropped", checkpoint: ptr(ckpt(0x200)), walEnd: 0x900,
			wantErr: []string{`replication slot "outboxd" does not exist but checkpoint`, "at 0/200"}},
		{name: "slot dropped, --allow-gap", checkpoint: ptr(ckpt(0x200)), walEnd: 0x900, allowGap: true, wantCreate: true},
		{name: "checkpoint of another database", checkpoint: ptr(other), slot: slotAt(0x100), walEnd: 0x900,
			wantErr: []string{"checkpoint", "7300000000000000002"}},
		{name: "checkpoint past the server's WAL (restored)", checkpoint: ptr(ckpt(0x800)), slot: slotAt(0x100), walEnd: 0x500,
			wantErr: []string{"checkpoint", "is at 0/800, past the end of the server's WAL at 0/500", "restored", "delete the checkpoint"}},
		{name: "checkpoint past the server's WAL, --allow-gap", checkpoint: ptr(ckpt(0x800)), slot: slotAt(0x100), walEnd: 0x500, allowGap: true,
			wantLSN: 0x100, wantFrom: 0x100, wantReplace: true},
		{name: "slot past the server's WAL (restored)", checkpoint: ptr(ckpt(0x200)), slot: slotAt(0x600), walEnd: 0x500,
			wantErr: []string{`replication slot "outboxd" is at 0/600, past the end of the server's WAL at 0/500`, "slot drop --force"}},
		{name: "no checkpoint, slot past the server's WAL", slot: slotAt(0x600), walEnd: 0x500,
			wantErr: []string{"past the end of the server's WAL"}},
	}
	store := checkpoint.NewFileStore(filepath.Join(t.TempDir(), "checkpoint.json"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := resumeFacts{identity: identity, serverWALEnd: tt.walEnd, slot: tt.slot, store: store, allowGap: tt.allowGap}
			if tt.checkpoint != nil {
				f.saved, f.hasCheckpoint = *tt.checkpoint, true
			}
			r, create, err := decideResume(f, zerolog.Nop())
			if tt.wantErr != nil {
				wantPermanent(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if create != tt.wantCreate || r.LSN != tt.wantLSN || r.From != tt.wantFrom || r.Replace != tt.wantReplace ||
				!r.CommittedBy.Equal(tt.wantCommittedBy) || r.BeforeSlot != tt.wantBeforeSlot {
				t.Errorf("decideResume: create %v, LSN %s, from %s, replace %v, committed by %s, before slot %q;\n"+
					"want create %v, LSN %s, from %s, replace %v, committed by %s, before slot %q",
					create, r.LSN, r.From, r.Replace, r.CommittedBy, r.BeforeSlot,
					tt.wantCreate, tt.wantLSN, tt.wantFrom, tt.wantReplace, tt.wantCommittedBy, tt.wantBeforeSlot)
			}
			if r.SystemID != sysID || r.Timeline != timeline || r.Slot != slotName {
				t.Errorf("identity %s/%d/%s, want the session's", r.SystemID, r.Timeline, r.Slot)
			}
			if !r.CommittedBy.IsZero() && !strings.Contains(r.Restored, "delete the checkpoint") {
				t.Errorf("restored fix %q names no way out", r.Restored)
			}
		})
	}
}

// wantPermanent fails unless err is a permanent error holding every want.
func wantPermanent(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil || !Permanent(err) {
		t.Fatalf("decideResume = %v, want a permanent error", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestDecideResumeNewTimeline: a checkpoint saved on an earlier timeline
// (before a failover or promotion) is resumed from when the server's
// history passes through it, and replaced at once with the new timeline;
// a checkpoint past the point where its timeline ended, or of a timeline
// not in the history, stops outboxd.
func TestDecideResumeNewTimeline(t *testing.T) {
	const sysID, slotName = "7300000000000000001", "outboxd"
	store := checkpoint.NewFileStore(filepath.Join(t.TempDir(), "checkpoint.json"))
	session := checkpoint.Checkpoint{SystemID: sysID, Timeline: 3, Slot: slotName}
	history := []replication.TimelineSwitch{{Timeline: 1, End: 0x300}, {Timeline: 2, End: 0x500}}
	tests := []struct {
		name     string
		timeline int32
		lsn      pglogrepl.LSN
		history  []replication.TimelineSwitch
		noSlot   bool
		allowGap bool
		wantErr  []string
	}{
		{name: "checkpoint before its timeline ended", timeline: 2, lsn: 0x480, history: history},
		{name: "checkpoint where its timeline ended", timeline: 2, lsn: 0x500, history: history},
		{name: "checkpoint two failovers back", timeline: 1, lsn: 0x200, history: history},
		{name: "checkpoint past where its timeline ended", timeline: 2, lsn: 0x501, history: history,
			wantErr: []string{"is at 0/501 on timeline 2, but timeline 2 ended at 0/500", "lost at the failover", "delete the checkpoint", "rm "}},
		{name: "older checkpoint past where its timeline ended", timeline: 1, lsn: 0x400, history: history,
			wantErr: []string{"timeline 1 ended at 0/300"}},
		{name: "timeline not in the history", timeline: 4, lsn: 0x200, history: history,
			wantErr: []string{`checkpoint timeline is "4" but the server reports "3"`, "not in the history of timeline 3"}},
		{name: "no history read", timeline: 2, lsn: 0x200,
			wantErr: []string{"not in the history"}},
		{name: "slot left behind by the promotion", timeline: 2, lsn: 0x480, history: history, noSlot: true,
			wantErr: []string{`replication slot "outboxd" does not exist on this server, which was promoted`, "timeline 2 then, 3 now",
				"(1) delete the checkpoint", "(2) publish the rows", "Primary failover"}},
		{name: "slot left behind, checkpoint past the switch", timeline: 2, lsn: 0x600, history: history, noSlot: true,
			wantErr: []string{"which was promoted", "(2) publish the rows", "may also hold events of transactions the failover lost", "ended at 0/500"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := session
			saved.Timeline, saved.LSN, saved.BeforeSlot = tt.timeline, tt.lsn, checkpoint.NoneBeforeSlot
			f := resumeFacts{identity: session, serverWALEnd: 0x900, saved: saved, hasCheckpoint: true,
				slot: replication.SlotState{Exists: !tt.noSlot, ConfirmedFlush: 0x100}, store: store, history: tt.history,
				failoverRecovery: "(1) delete the checkpoint; (2) publish the rows"}
			r, create, err := decideResume(f, zerolog.Nop())
			if tt.wantErr != nil {
				wantPermanent(t, err, tt.wantErr)
				if !tt.noSlot && !errors.Is(err, checkpoint.ErrMismatch) {
					t.Errorf("decideResume = %v, want a checkpoint mismatch", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if create || r.LSN != tt.lsn || r.From != 0x100 || !r.Replace || r.Timeline != 3 {
				t.Errorf("decideResume: create %v, LSN %s, from %s, replace %v, timeline %d; want resume at %s from 0/100, replaced on timeline 3",
					create, r.LSN, r.From, r.Replace, r.Timeline, tt.lsn)
			}
		})
	}
}
