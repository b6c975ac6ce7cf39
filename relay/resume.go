package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/replication"
)

// resume is where a session starts streaming and what it skips.
type resume struct {
	// Checkpoint is the identity every save carries, and in LSN the
	// resume point: transactions that commit before it are dropped.
	checkpoint.Checkpoint
	// From is where replication starts: the slot's position, so that the
	// transactions between it and the resume point (after a crash) are
	// seen, and checked, before they are dropped.
	From pglogrepl.LSN
	// CommittedBy is the latest commit time a dropped transaction can
	// have (the checkpoint's save time with margin for clock skew); zero
	// when there is no saved checkpoint to hold it to.
	CommittedBy time.Time
	// Restored is the way out when a dropped transaction turns out to
	// have committed after CommittedBy.
	Restored string
	// Replace is set when a saved checkpoint is not the resume point (a
	// gap the user accepted): it is overwritten before streaming.
	Replace bool
}

// clockSkew is how far the database's clock may run ahead of outboxd's
// before a transaction dropped at resume seems committed after the
// checkpoint that holds it.
const clockSkew = 5 * time.Minute

// resumeFacts is what the resume point is decided from: the stream's
// identity and WAL end, the saved checkpoint, the slot, and the setting.
type resumeFacts struct {
	identity      checkpoint.Checkpoint // system identifier, timeline and slot of this session
	serverWALEnd  pglogrepl.LSN         // IDENTIFY_SYSTEM's xlogpos
	saved         checkpoint.Checkpoint // the saved checkpoint, if hasCheckpoint
	hasCheckpoint bool
	slot          replication.SlotState
	store         checkpoint.Store // named in errors and fixes
	allowGap      bool
	// history is the current timeline's history, read when the checkpoint
	// was saved on another timeline (after a failover or promotion).
	history []replication.TimelineSwitch
	// failoverRecovery, set with history, is the recovery of the events
	// of a slot a promotion left behind (backfillSteps).
	failoverRecovery string
}

// resumePoint decides where streaming starts (docs/design.md invariant
// 5), creating the slot when decideResume says so.
func resumePoint(ctx context.Context, cfg Config, stream *replication.Stream, store checkpoint.Store,
	slot replication.SlotState, log zerolog.Logger) (resume, error) {
	facts := resumeFacts{
		identity:     checkpoint.Checkpoint{SystemID: stream.SystemID(), Timeline: stream.Timeline(), Slot: cfg.Slot},
		serverWALEnd: stream.ServerWALEnd(), slot: slot, store: store, allowGap: cfg.AllowGap,
	}
	saved, err := store.Load(ctx)
	switch {
	case err == nil:
		facts.saved, facts.hasCheckpoint = saved, true
	case !errors.Is(err, checkpoint.ErrNotFound):
		return resume{}, fmt.Errorf("load checkpoint from %s: %w", store, err)
	}
	if facts.hasCheckpoint && saved.Timeline != stream.Timeline() {
		if facts.history, err = stream.TimelineHistory(ctx); err != nil {
			return resume{}, err
		}
		facts.failoverRecovery = backfillSteps(cfg, saved, "delete the checkpoint: "+store.DeleteCommand())
	}
	r, createSlot, err := decideResume(facts, log)
	if err != nil || !createSlot {
		return r, err
	}
	consistent, before, err := createSlotAt(ctx, cfg, stream)
	if err != nil {
		return r, err
	}
	log.Info().Str("slot", cfg.Slot).Str("lsn", consistent.String()).Str("before_slot", before).Msg("created replication slot")
	// Saved at once: what the slot's snapshot tells of the rows before it
	// is gone with the snapshot.
	r.LSN, r.From, r.BeforeSlot, r.Replace = consistent, consistent, before, true
	return r, nil
}

// decideResume is the resume point: the checkpoint or the slot's
// confirmed_flush_lsn, whichever is later. It stops outboxd, unless
// allowGap, when the two cannot both be true: a slot ahead of the
// checkpoint or missing while a checkpoint exists (events never
// published), a checkpoint or slot past the server's WAL (the database was
// restored from an older copy). createSlot asks the caller to create the
// missing slot and start at its consistent point.
func decideResume(f resumeFacts, log zerolog.Logger) (r resume, createSlot bool, err error) {
	r = resume{Checkpoint: f.identity}
	saved, hasCheckpoint, slot := f.saved, f.hasCheckpoint, f.slot
	if hasCheckpoint {
		// The timeline is checked on its own: a checkpoint of an earlier
		// timeline is good when the server's history passes through it.
		if err := saved.Matches(f.identity.SystemID, saved.Timeline, f.identity.Slot); err != nil {
			return r, false, &fatalError{fmt.Errorf("checkpoint %s: %w", f.store, err)}
		}
		if saved.Timeline != f.identity.Timeline {
			err := timelineAncestor(f)
			if !slot.Exists && !f.allowGap {
				return r, false, &fatalError{slotLostAtFailover(f, err)}
			}
			if err != nil {
				return r, false, &fatalError{err}
			}
			log.Info().Int32("from_timeline", saved.Timeline).Int32("timeline", f.identity.Timeline).Str("checkpoint", saved.LSN.String()).
				Msg("the server changed timeline (a failover or promotion) after the checkpoint, which is in the new timeline's history: resuming")
			r.Replace = true // saved at once with the new timeline
		}
	}
	if err := pastServerWAL(f); err != nil {
		if !f.allowGap {
			return r, false, &fatalError{err}
		}
		log.Warn().Err(err).Msg("--allow-gap: resuming from the replication slot")
		hasCheckpoint, r.Replace = false, true
	}
	gapFix := fmt.Sprintf("find and republish the rows committed in between, then restart with --allow-gap; or delete the checkpoint in %s to start from the slot", f.store)
	if !slot.Exists {
		if hasCheckpoint && !f.allowGap {
			return r, false, &fatalError{fmt.Errorf("replication slot %q does not exist but checkpoint %s is at %s: the slot was dropped, so events committed since then are not in WAL any more; %s",
				f.identity.Slot, f.store, saved.LSN, gapFix)}
		}
		return r, true, nil
	}
	r.LSN, r.From = slot.ConfirmedFlush, slot.ConfirmedFlush
	if !hasCheckpoint {
		return r, false, nil
	}
	r.BeforeSlot = saved.BeforeSlot
	if slot.ConfirmedFlush > saved.LSN {
		if !f.allowGap {
			return r, false, &fatalError{fmt.Errorf("replication slot %q is at %s, ahead of checkpoint %s at %s: something outside outboxd advanced or recreated the slot, so events in between were never published; %s",
				f.identity.Slot, slot.ConfirmedFlush, f.store, saved.LSN, gapFix)}
		}
		r.Replace = true
		return r, false, nil
	}
	r.LSN = saved.LSN
	if !saved.SavedAt.IsZero() {
		r.CommittedBy = saved.SavedAt.Add(clockSkew)
		r.Restored = resumeFromSlotFix(f.identity.Slot, slot.ConfirmedFlush.String(), f.store, false)
	}
	return r, false, nil
}

// timelineAncestor reports, unless the checkpoint's position lies in the
// server's history, why resuming from it could skip or repeat
// transactions: its timeline must be an ancestor of the current one, and
// the checkpoint at or before the point where that timeline ended. A
// checkpoint past that point holds WAL the promoted server never had: the
// transactions outboxd published from there were lost by the failover,
// and the new timeline's transactions at those positions would be skipped.
func timelineAncestor(f resumeFacts) error {
	saved, current := f.saved, f.identity.Timeline
	mismatch := &checkpoint.MismatchError{Field: "timeline", Saved: fmt.Sprint(saved.Timeline), Current: fmt.Sprint(current)}
	for _, sw := range f.history {
		if sw.Timeline != saved.Timeline {
			continue
		}
		if saved.LSN <= sw.End {
			return nil
		}
		return fmt.Errorf("checkpoint %s is at %s on timeline %d, but timeline %d ended at %s when the server "+
			"switched to the timeline it is on now (%d): the new primary never had the WAL between the two, so the "+
			"events outboxd published from it are of transactions the database lost at the failover (with "+
			"synchronized_standby_slots on PostgreSQL 17+ this cannot happen), and resuming from %s would skip the "+
			"new timeline's transactions up to there; to resume from the slot instead, delete the checkpoint (%s), "+
			"then check the stream for the lost transactions' events (see the runbook, \"Primary failover\"): %w",
			f.store, saved.LSN, saved.Timeline, saved.Timeline, sw.End, current, saved.LSN, f.store.DeleteCommand(), mismatch)
	}
	return notInHistory(f.store, saved.Timeline, current)
}

// notInHistory is the refusal of a checkpoint whose timeline is not an
// ancestor of the server's.
func notInHistory(store checkpoint.Store, saved, current int32) error {
	mismatch := &checkpoint.MismatchError{Field: "timeline", Saved: fmt.Sprint(saved), Current: fmt.Sprint(current)}
	return fmt.Errorf("checkpoint %s: %w (timeline %d is not in the history of timeline %d)", store, mismatch, saved, current)
}

// slotLostAtFailover is the way out when the server was promoted since
// the checkpoint and the slot did not come along (PostgreSQL before 17, or
// a slot that was not a synchronised failover slot): the events committed
// since the checkpoint are in no slot, but their rows are in the outbox
// table. pastSwitch is timelineAncestor's error, if any.
func slotLostAtFailover(f resumeFacts, pastSwitch error) error {
	err := fmt.Errorf("replication slot %q does not exist on this server, which was promoted after checkpoint %s was saved "+
		"(timeline %d then, %d now): before PostgreSQL 17 a logical slot lives only on the primary (on 17+ only a failover "+
		"slot synchronised to the standby survives, see --slot-failover), so the events committed since the checkpoint "+
		"are in no slot; to recover them from the outbox table with nothing lost and nothing published twice: %s "+
		"(see the runbook, \"Primary failover\")", f.identity.Slot, f.store, f.saved.Timeline, f.identity.Timeline, f.failoverRecovery)
	if pastSwitch != nil {
		err = fmt.Errorf("%w; note: the stream may also hold events of transactions the failover lost: %w", err, pastSwitch)
	}
	return err
}

// createSlotAt creates the replication slot and reads, in the snapshot it
// exports, which rows of the table it will never send: those committed
// before it (checkpoint.Checkpoint.BeforeSlot).
func createSlotAt(ctx context.Context, cfg Config, stream *replication.Stream) (pglogrepl.LSN, string, error) {
	snap, err := stream.CreateSlotExportingSnapshot(ctx)
	if err != nil {
		return 0, "", err
	}
	before := ""
	if !cfg.messagesOnly() {
		if before, err = replication.RowsBeforeSlot(ctx, cfg.PGURL, snap.Name, cfg.Table); err != nil {
			return 0, "", err
		}
	}
	if before == "" {
		before = checkpoint.NoneBeforeSlot
	}
	return snap.ConsistentPoint, before, nil
}

// resumeFromSlotFix is the way out of a checkpoint that belongs to a
// history the restored database no longer has: resume from the slot,
// which was restored with the database.
func resumeFromSlotFix(slot, from string, store checkpoint.Store, allowGap bool) string {
	how := fmt.Sprintf("delete the checkpoint (%s)", store.DeleteCommand())
	if allowGap {
		how += ", or restart once with --allow-gap"
	}
	return fmt.Sprintf("to recover, %s: outboxd then resumes from replication slot %q at %s, which was restored with the "+
		"database, and publishes every transaction since (JetStream drops those it holds within the stream's duplicate "+
		"window); events published before the restore that the restored database lacks stay in the stream (see the "+
		"runbook, \"Database restored from a copy\")", how, slot, from)
}

// pastServerWAL reports a checkpoint or slot past the end of the server's
// WAL. Both only ever hold positions the server sent, so the database has
// gone back in time: restored from a copy, snapshot or backup of the same
// cluster (same system identifier and timeline) taken before outboxd last
// ran. Resuming from there would drop every transaction committed since
// the restore until the WAL passes that position again.
func pastServerWAL(f resumeFacts) error {
	end, slot, saved := f.serverWALEnd, f.slot, f.saved
	const restored = "the database was restored from a copy of itself taken before outboxd last ran " +
		"(a file system or volume snapshot, a copy of a stopped server, a backup without a new timeline), " +
		"so transactions committed since the restore are at positions outboxd would skip"
	if slot.Exists && slot.ConfirmedFlush > end {
		return fmt.Errorf("replication slot %q is at %s, past the end of the server's WAL at %s: %s; PostgreSQL itself "+
			"will not send them from this slot: drop it (outboxd slot drop --force) and recover the rows committed since "+
			"the restore from the outbox table with outboxd backfill (see the runbook, \"Database restored from a copy\"); "+
			"--allow-gap starts anyway and loses them", f.identity.Slot, slot.ConfirmedFlush, end, restored)
	}
	if f.hasCheckpoint && saved.LSN > end {
		from := "the position it gets"
		if slot.Exists {
			from = slot.ConfirmedFlush.String()
		}
		return fmt.Errorf("checkpoint %s is at %s, past the end of the server's WAL at %s: %s; %s",
			f.store, saved.LSN, end, restored, resumeFromSlotFix(f.identity.Slot, from, f.store, true))
	}
	return nil
}
