package relay

import (
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
				if err == nil || !Permanent(err) {
					t.Fatalf("decideResume = %+v, %v; want a permanent error", r, err)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
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

func ptr[T any](v T) *T { return &v }
