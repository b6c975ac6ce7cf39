package replication

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// RowsBeforeSlot reads which rows of table were committed before a slot
// existed, in a read-only transaction that imports snapshot: a new slot's
// exported snapshot, which sees exactly the rows committed before the
// slot's consistent point. With snapshot "" it uses a current one instead,
// which sees those rows and some the slot sends too: a stand-in that errs
// on the side of keeping rows, for a slot whose own snapshot is gone.
//
// It returns "" when the table held no row then, and otherwise that
// snapshot in pg_snapshot text form ("xmin:xmax:xip,..."): a row was
// committed before the slot when its xmin is visible in it (see
// BeforeSlotCondition).
func RowsBeforeSlot(ctx context.Context, connString, snapshot string, table Table) (string, error) {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return "", fmt.Errorf("read the rows before the slot: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only
	if snapshot != "" {
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+strings.ReplaceAll(snapshot, "'", "''")+"'"); err != nil {
			return "", fmt.Errorf("import snapshot %q: %w", snapshot, err)
		}
	}
	var current string
	var any bool
	if err := tx.QueryRow(ctx, "SELECT pg_current_snapshot()::text, EXISTS (SELECT FROM "+table.String()+")").Scan(&current, &any); err != nil {
		return "", fmt.Errorf("read the rows of %s before the slot: %w", table, err)
	}
	if !any {
		return "", nil
	}
	return current, nil
}

// BeforeSlotCondition is the SQL condition that a row of the table was
// committed before the slot, given the snapshot RowsBeforeSlot returned as
// the parameter named snapshotParam (e.g. "$1"). The row's 32-bit xmin is
// widened to the 64-bit xid pg_visible_in_snapshot takes against the
// current snapshot's next xid, which every visible row's xmin precedes by
// less than 2^32. A row updated since counts as written by the update
// (its xmin is the updater's). A row written by a subtransaction of a
// transaction open when the snapshot was taken counts as before it
// (pg_current_snapshot lists top-level transactions only), which keeps it.
func BeforeSlotCondition(snapshotParam string) string {
	const next = "(SELECT pg_snapshot_xmax(pg_current_snapshot())::text::int8)"
	return fmt.Sprintf("pg_visible_in_snapshot((%[1]s - ((%[1]s %% 4294967296) - xmin::text::int8 + 4294967296) %% 4294967296)::text::xid8, %[2]s::pg_snapshot)",
		next, snapshotParam)
}
