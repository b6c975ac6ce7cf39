package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// verifyChunk is how many message ids verify holds before it copies them
// to PostgreSQL: about 1 MB, whatever the stream's length.
const verifyChunk = 10_000

// verifyTable is the temporary table that holds the stream's message ids
// and sequences on verify's connection; the session's end drops it.
const verifyTable = "outboxd_verify"

// createVerifyTable creates verifyTable. A role without the TEMP privilege
// and a read-only session (a standby) cannot, and the error says what to
// do instead.
func createVerifyTable(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `CREATE TEMP TABLE `+verifyTable+` (id text NOT NULL, seq bigint NOT NULL)`)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
		cfg := conn.Config()
		db, role := pgx.Identifier{cfg.Database}.Sanitize(), pgx.Identifier{cfg.User}.Sanitize()
		return fmt.Errorf("verify copies the stream's message ids to a temporary table, and role %s may not create one in database %s: "+
			"GRANT TEMP ON DATABASE %s TO %s, or give --pg-url a role that may: %w", role, db, db, role, err)
	case errors.As(err, &pgErr) && pgErr.Code == "25006": // read_only_sql_transaction
		return fmt.Errorf("verify copies the stream's message ids to a temporary table, which a read-only session cannot create "+
			"(a standby, or default_transaction_read_only): give --pg-url the primary: %w", err)
	}
	return fmt.Errorf("create verify's temporary table: %w", err)
}

// streamID is where the stream stores a message id.
type streamID struct {
	id  string
	seq uint64
}

// idSpill copies the stream's (id, sequence) pairs to verifyTable a chunk
// at a time, so verify's memory is one chunk.
type idSpill struct {
	conn *pgx.Conn
	// buf is never longer than its capacity, the chunk size: add copies it
	// out when it is full.
	buf []streamID
	// copies counts the COPYs; largest is the longest buf copied.
	copies, largest int
}

func newIDSpill(conn *pgx.Conn, chunk int) *idSpill {
	return &idSpill{conn: conn, buf: make([]streamID, 0, chunk)}
}

// add holds one message's id and sequence, copying the chunk when it is full.
func (s *idSpill) add(ctx context.Context, id string, seq uint64) error {
	s.buf = append(s.buf, streamID{id, seq})
	if len(s.buf) < cap(s.buf) {
		return nil
	}
	return s.flush(ctx)
}

// flush copies what add holds to verifyTable.
func (s *idSpill) flush(ctx context.Context) error {
	if len(s.buf) == 0 {
		return nil
	}
	if _, err := s.conn.CopyFrom(ctx, pgx.Identifier{verifyTable}, []string{"id", "seq"}, &chunkRows{ids: s.buf, i: -1}); err != nil {
		return fmt.Errorf("copy the stream's message ids to verify's temporary table: %w", err)
	}
	s.copies++
	s.largest = max(s.largest, len(s.buf))
	clear(s.buf) // let the ids go
	s.buf = s.buf[:0]
	return nil
}

// chunkRows is a chunk as a pgx.CopyFromSource.
type chunkRows struct {
	ids []streamID
	i   int
	row [2]any // reused: CopyFrom encodes each row before the next
}

func (c *chunkRows) Next() bool { c.i++; return c.i < len(c.ids) }

func (c *chunkRows) Values() ([]any, error) {
	c.row[0], c.row[1] = c.ids[c.i].id, int64(c.ids[c.i].seq)
	return c.row[:], nil
}

func (c *chunkRows) Err() error { return nil }

// compareSQL compares the table's rows in range with the stream's ids in
// one grouping of both by id, not a join: PostgreSQL cannot estimate a
// join on the computed ids (the prefix and a cast), and a wrong estimate
// picks a plan that takes minutes for a million rows. ids holds, per id,
// its messages (n, the first's sequence) and rows (their aggregate and
// created_at). A row is reordered when its message's sequence is not
// after the highest one among the rows of its aggregate created earlier:
// a microsecond or more earlier, a timestamp's resolution, so that rows of
// one created_at (which one transaction shares) are not ordered among
// themselves. The frame's start stays at the aggregate's first row, so
// PostgreSQL keeps a running maximum (excluding the current row's peers
// instead would aggregate the whole frame again for every row).
// Arguments: the id column, the aggregate expression, the created_at
// column, the table, and the range's bounds as SQL; $1 is the id prefix,
// $2 the number of examples.
const compareSQL = `WITH ids AS MATERIALIZED (
	SELECT id, count(*) FILTER (WHERE NOT is_row) AS n, min(seq) AS seq, count(*) FILTER (WHERE is_row) AS rows,
		min(agg) AS agg, min(at) AS at
	FROM (
		SELECT id, seq, false AS is_row, NULL AS agg, NULL AS at FROM pg_temp.` + verifyTable + `
		UNION ALL
		SELECT $1::text || %[1]s::text, NULL, true, %[2]s, %[3]s FROM %[4]s WHERE %[3]s >= %[5]s AND %[3]s < %[6]s
	) u
	GROUP BY id
), j AS MATERIALIZED (
	SELECT id, at, rows, n, seq <= max(seq) OVER (PARTITION BY agg ORDER BY at
		RANGE BETWEEN UNBOUNDED PRECEDING AND '1 microsecond' PRECEDING) AS reordered
	FROM ids WHERE rows > 0
)
SELECT c.rows, c.lost, c.duplicated, c.reordered,
	(SELECT count(*) FROM ids WHERE rows = 0),
	ARRAY(SELECT id FROM j WHERE n = 0 ORDER BY at, id LIMIT $2),
	ARRAY(SELECT id FROM j WHERE n > 1 ORDER BY at, id LIMIT $2),
	ARRAY(SELECT id FROM j WHERE reordered ORDER BY at, id LIMIT $2)
FROM (SELECT coalesce(sum(rows), 0)::bigint AS rows, coalesce(sum(rows) FILTER (WHERE n = 0), 0)::bigint AS lost,
	coalesce(sum(rows) FILTER (WHERE n > 1), 0)::bigint AS duplicated,
	coalesce(sum(rows) FILTER (WHERE reordered), 0)::bigint AS reordered FROM j) c`

// createdAtType returns the type of the column mapped to created_at, which
// must be a timestamp: compareSQL orders by it to the microsecond.
func createdAtType(ctx context.Context, conn *pgx.Conn, cfg VerifyConfig) (string, error) {
	createdAt, _ := cfg.Columns.Mapped("created_at")
	typ, err := columnType(ctx, conn, cfg.Table, createdAt)
	if err != nil {
		return "", err
	}
	if typ != "timestamp with time zone" && typ != "timestamp without time zone" {
		return "", fmt.Errorf("column %q of %s, mapped to created_at, is %s: verify needs a timestamptz or timestamp", createdAt, cfg.Table, typ)
	}
	return typ, nil
}

// compareWithTable fills r's counts and examples from the table's rows in
// [r.Since, r.Until) and the ids in verifyTable: only they cross the
// connection, never a row per message. typ is created_at's type.
func compareWithTable(ctx context.Context, conn *pgx.Conn, cfg VerifyConfig, typ string, r *VerifyReport) error {
	idCol, _ := cfg.Columns.Mapped("id")
	createdAt, _ := cfg.Columns.Mapped("created_at")
	aggregate := "''"
	if col, ok := cfg.Columns.Mapped("aggregate_id"); ok {
		aggregate = pgx.Identifier{col}.Sanitize() + "::text"
	}
	at := pgx.Identifier{createdAt}.Sanitize()
	query := fmt.Sprintf(compareSQL, pgx.Identifier{idCol}.Sanitize(), aggregate, at, cfg.Table,
		timeIn(r.Since, typ, cfg.Retention.CreatedAtZone), timeIn(r.Until, typ, cfg.Retention.CreatedAtZone))
	err := conn.QueryRow(ctx, query, cfg.IDPrefix, maxExamples).Scan(&r.Rows, &r.Lost.Count, &r.Duplicated.Count, &r.Reordered.Count,
		&r.NotInTable, &r.Lost.Examples, &r.Duplicated.Examples, &r.Reordered.Examples)
	var pgErr *pgconn.PgError
	if err != nil && ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == "57014" { // query_canceled
		return fmt.Errorf("compare the rows of %s with the stream: the comparison ran past the role's statement_timeout: "+
			"verify a shorter range (--since, --until), or let it run longer, e.g. ALTER ROLE %s SET statement_timeout = 0 for the role in --pg-url: %w",
			cfg.Table, pgx.Identifier{conn.Config().User}.Sanitize(), err)
	}
	if err != nil {
		return fmt.Errorf("compare the rows of %s with the stream: %w", cfg.Table, err)
	}
	return nil
}
