package relay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/checkpoint"
)

// sinceMargin is how long before the checkpoint's save the recovery of a
// dropped publication reads rows from: it must be longer than the longest
// transaction that writes outbox rows (its rows are created when it starts,
// and published when it commits). The rows of the margin the stream holds
// already are left out, so a long margin costs reading, not repeats.
const sinceMargin = time.Hour

// publicationDropped turns the walsender's "publication ... does not
// exist" into the way out. The slot cannot get past the drop: it decodes
// each change with the catalog as of that change, where the publication is
// missing, even once it is created again (PostgreSQL 15). So the recovery
// is a new slot, and a backfill of the rows written since the last
// checkpoint that the stream does not hold.
func publicationDropped(ctx context.Context, cfg Config, store checkpoint.Store, err error) error {
	create := "CREATE PUBLICATION " + pgx.Identifier{cfg.Publication}.Sanitize()
	if !cfg.messagesOnly() {
		create += " FOR TABLE " + cfg.Table.String()
	}
	create += " WITH (publish = 'insert')"
	saved, loadErr := store.Load(context.WithoutCancel(ctx))
	if loadErr != nil {
		saved = checkpoint.Checkpoint{}
	}
	steps := backfillSteps(cfg, saved,
		"create the publication again: "+create,
		fmt.Sprintf("drop the stuck slot and its checkpoint: outboxd slot drop --slot %s --yes; %s", cfg.Slot, store.DeleteCommand()))
	return &fatalError{fmt.Errorf("%w: publication %q was dropped while replication slot %q still had WAL to decode, and the slot cannot get past the drop "+
		"even once the publication exists again (it reads the catalog as of each change); to recover with nothing lost and nothing published twice: %s "+
		"(see the runbook, \"Publication dropped\")", err, cfg.Publication, cfg.Slot, steps)}
}

// slotInvalidated turns Preflight's refusal of a slot PostgreSQL
// invalidated into the recovery from the outbox table: a new slot, and a
// backfill of the rows written since the last checkpoint that the stream
// does not hold.
func slotInvalidated(ctx context.Context, cfg Config, store checkpoint.Store, err error) error {
	saved, loadErr := store.Load(context.WithoutCancel(ctx))
	if loadErr != nil {
		saved = checkpoint.Checkpoint{}
	}
	steps := backfillSteps(cfg, saved,
		fmt.Sprintf("drop the invalidated slot and its checkpoint: outboxd slot drop --slot %s --yes; %s", cfg.Slot, store.DeleteCommand()))
	return &fatalError{fmt.Errorf("%w; to recover with nothing lost and nothing published twice: %s (see the runbook, \"Slot invalidated\")", err, steps)}
}

// backfillSteps is the numbered recovery of the events a slot that cannot
// be used any more had not delivered: first, then a backfill from the
// outbox table of the rows created since an hour before the checkpoint
// saved was saved (now when it has no save time) that the stream does not
// hold, which creates the slot anew, then run. In logical-message mode, or
// without created_at mapped, it says what the operator must do instead.
func backfillSteps(cfg Config, saved checkpoint.Checkpoint, first ...string) string {
	from := time.Now().UTC()
	if !saved.SavedAt.IsZero() {
		from = saved.SavedAt.UTC()
	}
	steps := first
	_, createdAt := cfg.Columns.Mapped("created_at")
	switch {
	case cfg.messagesOnly():
		steps = append(steps, "the events emitted as logical messages since the checkpoint are only in the lost slot's WAL, which no slot can decode any more: "+
			"find them in the application and emit them again; then start outboxd run, which creates a new slot")
	case !createdAt:
		steps = append(steps, "publish the rows written since the checkpoint was saved ("+from.Format(time.RFC3339)+
			") with outboxd backfill --where '<those rows>' and the same settings (map created_at with --columns to let backfill --since find them), then start outboxd run")
	default:
		steps = append(steps, fmt.Sprintf("publish the rows created since an hour before the checkpoint was saved that the stream does not hold: "+
			"outboxd backfill --since %s with the same settings (it creates the slot anew)", from.Add(-sinceMargin).Format(time.RFC3339)),
			"start outboxd run again")
	}
	for i := range steps {
		steps[i] = fmt.Sprintf("(%d) %s", i+1, steps[i])
	}
	return strings.Join(steps, "; ")
}
