package inbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Execer runs SQL: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// TableDDL returns the SQL that creates the inbox table, for a migration
// tool. For table "inbox":
//
//	CREATE TABLE IF NOT EXISTS "inbox" (
//	    consumer    text        NOT NULL,
//	    message_id  text        NOT NULL,
//	    subject     text        NOT NULL,
//	    received_at timestamptz NOT NULL DEFAULT now(),
//	    PRIMARY KEY (consumer, message_id)
//	);
//	CREATE INDEX IF NOT EXISTS "inbox_received_at" ON "inbox" (consumer, received_at);
//
// The key holds the consumer's name, so that two consumers writing to one
// database (billing and shipping, say) each apply an event once. The
// index serves retention's deletes. The columns are those of
// examples/consumer's table, which this package can use as it is once the
// index is added.
func TableDDL(table string) (string, error) {
	ident, err := tableIdent(table)
	if err != nil {
		return "", err
	}
	index := pgx.Identifier{ident[len(ident)-1] + "_received_at"}.Sanitize()
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
    consumer    text        NOT NULL,
    message_id  text        NOT NULL,
    subject     text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS %s ON %s (consumer, received_at);`, ident.Sanitize(), index, ident.Sanitize()), nil
}

// CreateTable creates the inbox table and its index if they do not exist
// (TableDDL). The schema must exist.
func CreateTable(ctx context.Context, db Execer, table string) error {
	ddl, err := TableDDL(table)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("inbox: create table %s: %w", table, err)
	}
	return nil
}

// tableIdent parses "table" or "schema.table". Names are taken as
// written (case kept) and quoted in SQL.
func tableIdent(table string) (pgx.Identifier, error) {
	parts := strings.Split(table, ".")
	bad := table == "" || len(parts) > 2
	for _, p := range parts {
		bad = bad || p == "" || len(p) > 63 || strings.ContainsAny(p, "\"\x00")
	}
	if bad {
		return nil, &ConfigError{"Table", strconv.Quote(table), "is not a table name",
			"name the inbox table as table or schema.table, e.g. inbox (create it with CreateTable)"}
	}
	return pgx.Identifier(parts), nil
}

// statements is the SQL a consumer runs, for its table.
type statements struct {
	// record adds a message's row, or nothing if a delivery of the same
	// message got there first. When that delivery is still in its
	// transaction, the insert waits for it to commit (then adds nothing)
	// or roll back (then adds the row): two copies in flight at once are
	// safe too. A SELECT first would let both apply it.
	record string
	// check reads nothing from the table: it fails when the table or a
	// column is missing, before any message is taken.
	check string
	// expire deletes a batch of a consumer's rows older than $2
	// microseconds.
	// Batches keep each transaction short, so that retention never holds
	// locks the workers wait for.
	expire string
}

func newStatements(table string) (statements, error) {
	ident, err := tableIdent(table)
	if err != nil {
		return statements{}, err
	}
	t := ident.Sanitize()
	return statements{
		record: "INSERT INTO " + t + " (consumer, message_id, subject) VALUES ($1, $2, $3) ON CONFLICT (consumer, message_id) DO NOTHING",
		check:  "SELECT consumer, message_id, subject, received_at FROM " + t + " LIMIT 0",
		expire: "DELETE FROM " + t + " WHERE ctid = ANY (ARRAY(SELECT ctid FROM " + t +
			" WHERE consumer = $1 AND received_at < now() - $2 * interval '1 microsecond' LIMIT $3))",
	}, nil
}
