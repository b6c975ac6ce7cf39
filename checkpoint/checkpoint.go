package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
)

// ErrNotFound is returned by [Store.Load] when no checkpoint was saved yet;
// outboxd then starts from the replication slot's position.
var ErrNotFound = errors.New("no checkpoint saved yet")

// ErrMismatch is matched (with errors.Is) by every error [Checkpoint.Matches]
// returns.
var ErrMismatch = errors.New("checkpoint belongs to another database, timeline or slot")

// ErrCorrupt is matched (with errors.Is) by the error [Store.Load] returns
// when the stored value is not a valid checkpoint. Retrying cannot fix it.
var ErrCorrupt = errors.New("stored checkpoint is not valid")

// CorruptError reports a stored checkpoint that cannot be read, with what
// is wrong and the ways out. It matches ErrCorrupt.
type CorruptError struct {
	// What names the stored value: "file /var/lib/outboxd/checkpoint.json",
	// "kv:outboxd/slot revision 7".
	What string
	// Problem says what is wrong with it.
	Problem string
	// Delete is the command that deletes it.
	Delete string
}

// Error names the value, the problem and both fixes.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("checkpoint %s is not a valid checkpoint: %s; retrying cannot fix it: restore it from a backup, "+
		"or delete it (%s) so that outboxd resumes from the replication slot's confirmed position, which is never ahead of "+
		"the last checkpoint it saved: nothing is skipped, and the transactions since are published again "+
		"(JetStream drops those within the stream's duplicate window)", e.What, e.Problem, e.Delete)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// decodeStored decodes a stored checkpoint, or returns a *CorruptError
// naming what and how to delete it.
func decodeStored(data []byte, what, deleteCmd string) (Checkpoint, error) {
	var cp Checkpoint
	err := json.Unmarshal(data, &cp)
	if err == nil {
		return cp, nil
	}
	problem := err.Error()
	if len(bytes.TrimSpace(data)) == 0 {
		problem = "it is empty"
	}
	return Checkpoint{}, &CorruptError{What: what, Problem: problem, Delete: deleteCmd}
}

// Store persists one checkpoint. Implementations are [FileStore] and
// [KVStore].
type Store interface {
	// Load returns the saved checkpoint. It returns an error matching
	// ErrNotFound when nothing was saved yet, a *CorruptError (matching
	// ErrCorrupt) when the stored value does not decode, and a descriptive
	// error when it cannot be read.
	Load(ctx context.Context) (Checkpoint, error)
	// Save stores cp durably, replacing the previous checkpoint. When it
	// returns nil the checkpoint survives a crash of outboxd and of the
	// machine (as far as the backing storage promises); when it returns an
	// error the caller must assume the previous checkpoint is still the one
	// in force.
	Save(ctx context.Context, cp Checkpoint) error
	// String names the store for logs, for example "kv:outboxd/slot" or
	// "file:/var/lib/outboxd/checkpoint.json".
	String() string
	// DeleteCommand is the shell command that deletes the checkpoint, for
	// the errors whose fix is to resume from the slot instead.
	DeleteCommand() string
}

// Checkpoint is a position in the WAL that outboxd has fully delivered, with
// the identity of the stream it is a position in.
//
// In a store it is JSON with the field names lsn, system_id, timeline, slot,
// saved_at and before_slot; the LSN is in PostgreSQL's "X/Y" text form so that a person
// can compare it with pg_replication_slots. Unknown fields are ignored when
// reading, so later versions may add some.
type Checkpoint struct {
	// LSN is the end LSN of the newest transaction whose every message (and
	// every earlier transaction's) JetStream acknowledged.
	LSN pglogrepl.LSN
	// SystemID is the database cluster's system identifier
	// (IDENTIFY_SYSTEM's systemid).
	SystemID string
	// Timeline is the server's timeline when the checkpoint was taken.
	Timeline int32
	// Slot is the logical replication slot the LSN was read from.
	Slot string
	// SavedAt is when the checkpoint was written. A transaction that
	// commits before LSN must have committed before SavedAt.
	SavedAt time.Time
	// BeforeSlot says which rows of the outbox table were committed before
	// the slot existed, so outboxd never published them and retention
	// must keep them: NoneBeforeSlot, or the rows visible in this
	// PostgreSQL snapshot (pg_snapshot text, "xmin:xmax:xip,..."); "" when
	// not known (a slot created outside outboxd, or by an older one).
	BeforeSlot string
}

// NoneBeforeSlot is Checkpoint.BeforeSlot when no row predates the slot
// (or a backfill published those that do).
const NoneBeforeSlot = "none"

// checkpointJSON is the stored form of a Checkpoint. Its field names are a
// file format: do not rename them.
type checkpointJSON struct {
	LSN      string    `json:"lsn"`
	SystemID string    `json:"system_id"`
	Timeline int32     `json:"timeline"`
	Slot     string    `json:"slot"`
	SavedAt  time.Time `json:"saved_at"`
	// BeforeSlot is omitted when unknown.
	BeforeSlot string `json:"before_slot,omitempty"`
}

// MarshalJSON encodes c in its stored form.
func (c Checkpoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkpointJSON{
		LSN:        c.LSN.String(),
		SystemID:   c.SystemID,
		Timeline:   c.Timeline,
		Slot:       c.Slot,
		SavedAt:    c.SavedAt,
		BeforeSlot: c.BeforeSlot,
	})
}

// UnmarshalJSON decodes the stored form. A missing or malformed lsn is an
// error; unknown fields are ignored.
func (c *Checkpoint) UnmarshalJSON(data []byte) error {
	var j checkpointJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	if j.LSN == "" {
		return errors.New("checkpoint has no lsn")
	}
	lsn, err := parseLSN(j.LSN)
	if err != nil {
		return err
	}
	*c = Checkpoint{LSN: lsn, SystemID: j.SystemID, Timeline: j.Timeline, Slot: j.Slot, SavedAt: j.SavedAt, BeforeSlot: j.BeforeSlot}
	return nil
}

// parseLSN is stricter than pglogrepl.ParseLSN, which accepts trailing
// garbage ("0/10zz"): a checkpoint that does not parse exactly must not be
// half-trusted.
func parseLSN(s string) (pglogrepl.LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if ok {
		h, errHi := strconv.ParseUint(hi, 16, 32)
		l, errLo := strconv.ParseUint(lo, 16, 32)
		if errHi == nil && errLo == nil {
			return pglogrepl.LSN(h<<32 | l), nil
		}
	}
	return 0, fmt.Errorf("invalid lsn %q: want PostgreSQL's X/Y form with 1 to 8 hex digits on each side, like \"16/B374D848\"", s)
}

// MismatchError reports that a stored checkpoint was written for a different
// stream than the one outboxd is now connected to. Its LSN cannot be trusted
// as a position in the current stream: resuming from it would silently skip
// or repeat transactions.
type MismatchError struct {
	// Field is "system_id", "timeline" or "slot".
	Field string
	// Saved is the value in the checkpoint; Current is the live one.
	Saved, Current string
}

// Error names the field, both values and what the difference usually means.
func (e *MismatchError) Error() string {
	var meaning string
	switch e.Field {
	case "system_id":
		meaning = "outboxd is connected to a different database cluster than the one the checkpoint was written for " +
			"(a cluster re-created or restored from a dump, or the wrong host): its LSNs describe another WAL"
	case "timeline":
		meaning = "the server changed timeline since the checkpoint was written " +
			"(failover to another primary, or a restore with point-in-time recovery): " +
			"WAL after the fork point may hold different transactions than the ones already published"
	case "slot":
		meaning = "the checkpoint belongs to another replication slot: its LSN says nothing about what this slot delivered"
	default:
		meaning = "the checkpoint was written for another stream"
	}
	return fmt.Sprintf("checkpoint %s is %q but the server reports %q: %s; "+
		"check the stream for gaps or repeats before moving the checkpoint aside",
		e.Field, e.Saved, e.Current, meaning)
}

// Is makes errors.Is(err, ErrMismatch) true.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// Matches reports whether c was written for the given database system
// identifier, timeline and slot (docs/design.md, invariant 5). It returns nil when
// all three are equal, otherwise one *MismatchError per differing field
// (joined with errors.Join when several differ); every one matches
// ErrMismatch.
func (c Checkpoint) Matches(systemID string, timeline int32, slot string) error {
	var errs []error
	if c.SystemID != systemID {
		errs = append(errs, &MismatchError{Field: "system_id", Saved: c.SystemID, Current: systemID})
	}
	if c.Timeline != timeline {
		errs = append(errs, &MismatchError{
			Field: "timeline", Saved: strconv.Itoa(int(c.Timeline)), Current: strconv.Itoa(int(timeline)),
		})
	}
	if c.Slot != slot {
		errs = append(errs, &MismatchError{Field: "slot", Saved: c.Slot, Current: slot})
	}
	return errors.Join(errs...)
}
