package bench

import (
	"context"
	"fmt"
)

// pgCounters are cumulative counters of the work a relay made PostgreSQL do.
type pgCounters struct {
	statements  float64 // pg_stat_statements calls by the relay's role
	blocks      float64 // shared blocks those statements hit or read
	rowsScanned float64 // seq_tup_read + idx_tup_fetch on the relay's table
	rowsUpdated float64 // n_tup_upd on the relay's table
}

// pgLoad is the rate of each counter over an interval.
type pgLoad struct {
	StatementsPerSec  float64 `json:"statements_per_sec"`
	BlocksPerSec      float64 `json:"shared_blocks_per_sec"`
	RowsScannedPerSec float64 `json:"rows_scanned_per_sec"`
	RowsUpdatedPerSec float64 `json:"rows_updated_per_sec"`
}

// readPGCounters reads the counters for table. The table statistics lag a
// backend's work by up to a second (PostgreSQL flushes them that often),
// which an interval of many seconds absorbs.
func (e *env) readPGCounters(ctx context.Context, table string) (pgCounters, error) {
	var c pgCounters
	err := e.conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0), coalesce(sum(shared_blks_hit + shared_blks_read), 0)
		FROM pg_stat_statements WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = $1)`, relayRole).
		Scan(&c.statements, &c.blocks)
	if err != nil {
		return c, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	err = e.conn.QueryRow(ctx, `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0), n_tup_upd
		FROM pg_stat_user_tables WHERE relid = $1::regclass`, table).Scan(&c.rowsScanned, &c.rowsUpdated)
	if err != nil {
		return c, fmt.Errorf("read pg_stat_user_tables for %s: %w", table, err)
	}
	return c, nil
}

func (c pgCounters) rateSince(before pgCounters, seconds float64) pgLoad {
	return pgLoad{
		StatementsPerSec:  (c.statements - before.statements) / seconds,
		BlocksPerSec:      (c.blocks - before.blocks) / seconds,
		RowsScannedPerSec: (c.rowsScanned - before.rowsScanned) / seconds,
		RowsUpdatedPerSec: (c.rowsUpdated - before.rowsUpdated) / seconds,
	}
}
