package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SlotSnapshot is a new slot's consistent point with the snapshot the
// server exported at that point: a transaction that imports the snapshot
// sees exactly the rows committed before the first transaction the slot
// decodes.
type SlotSnapshot struct {
	// ConsistentPoint is the slot's start: streaming from it yields every
	// commit the snapshot does not see.
	ConsistentPoint pglogrepl.LSN
	// Name is the exported snapshot's name, for SET TRANSACTION SNAPSHOT.
	Name string
}

// CreateSlotExportingSnapshot creates the logical slot with the pgoutput
// plugin, like CreateSlot, and exports the snapshot of its consistent
// point. The snapshot can be imported only while this connection stays
// open and idle: call no other method but Close until the reading
// transaction has imported it (SET TRANSACTION SNAPSHOT) and finished. A
// slot that exists already is an error matching ErrSlotExists: its
// snapshot is gone.
func (s *Stream) CreateSlotExportingSnapshot(ctx context.Context) (SlotSnapshot, error) {
	sql := fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput %s", s.cfg.Slot,
		slotOptions(serverMajor(s.conn), "export", s.cfg.Failover))
	res, err := pglogrepl.ParseCreateReplicationSlot(s.conn.Exec(ctx, sql))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42710" {
		return SlotSnapshot{}, fmt.Errorf("create replication slot %q: %w", s.cfg.Slot, ErrSlotExists)
	}
	if err != nil {
		return SlotSnapshot{}, classify(fmt.Sprintf("create replication slot %q", s.cfg.Slot), err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return SlotSnapshot{}, fmt.Errorf("parse consistent point %q: %w", res.ConsistentPoint, err)
	}
	if res.SnapshotName == "" {
		return SlotSnapshot{}, fmt.Errorf("create replication slot %q: the server exported no snapshot", s.cfg.Slot)
	}
	return SlotSnapshot{ConsistentPoint: lsn, Name: res.SnapshotName}, nil
}

// SnapshotQuery selects the outbox rows a backfill publishes.
type SnapshotQuery struct {
	// Table is the outbox table.
	Table Table
	// Where is the operator's SQL predicate on the table's columns.
	Where string
	// OrderBy are the columns the rows are read in order of (unquoted).
	OrderBy []string
	// Publication is the publication run streams. Its row filter on the
	// table (PostgreSQL 15+), if any, is ANDed to Where, so backfill
	// publishes no row the stream would leave out.
	Publication string
}

// wherePrefix is what precedes the predicate after the SELECT list. The
// predicate stands on lines of its own, so a trailing -- comment cannot
// swallow the parenthesis.
func (q SnapshotQuery) wherePrefix() string { return " FROM " + q.Table.String() + " WHERE (\n" }

// from is the query's FROM and WHERE clauses.
func (r *SnapshotRead) from() string {
	from := r.q.wherePrefix() + r.q.Where + "\n)"
	if r.rowFilter != "" {
		from += " AND (" + r.rowFilter + ")"
	}
	return from
}

// PredicateError is a --where predicate PostgreSQL refused. It names the
// predicate, what is wrong and the fix.
type PredicateError struct {
	Where   string
	Problem string
	Fix     string
}

func (e *PredicateError) Error() string {
	return fmt.Sprintf("--where %q %s; fix: %s", e.Where, e.Problem, e.Fix)
}

// SnapshotColumn is one column of the rows a SnapshotRead returns.
type SnapshotColumn struct {
	Name    string
	TypeOID uint32
}

// SnapshotRead is a read-only REPEATABLE READ transaction on a normal
// connection, in a slot's exported snapshot, that reads outbox rows in
// text format with the replication connection's settings (DateStyle ISO,
// TimeZone UTC, bytea_output hex), so values read the same as pgoutput
// sends them. Its methods must be called from one goroutine at a time.
type SnapshotRead struct {
	conn         *pgconn.PgConn
	q            SnapshotQuery
	selectList   string           // "SELECT" and the columns the stream carries
	columns      []SnapshotColumn // those columns, as the result describes them
	tableColumns []string         // every column, for errors
	rowFilter    string           // the publication's, "" for none
}

// BeginSnapshotRead connects, begins the transaction, imports the named
// snapshot (none when snapshot is "": the current one, to check a query
// before creating the slot) and reads the table's columns.
func BeginSnapshotRead(ctx context.Context, connString, snapshot string, q SnapshotQuery) (*SnapshotRead, error) {
	pgcfg, err := decoderSettings(connString, "outboxd backfill")
	if err != nil {
		return nil, err
	}
	// One statement reads the whole table at the pace JetStream
	// acknowledges: a statement_timeout set for the role must not cut it.
	pgcfg.RuntimeParams["statement_timeout"] = "0"
	pgcfg.RuntimeParams["idle_in_transaction_session_timeout"] = "0"
	conn, err := pgconn.ConnectConfig(ctx, pgcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	r := &SnapshotRead{conn: conn, q: q}
	begin := "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	if snapshot != "" {
		// SET TRANSACTION SNAPSHOT must come before any query of the
		// transaction.
		begin += "; SET TRANSACTION SNAPSHOT '" + strings.ReplaceAll(snapshot, "'", "''") + "'"
	}
	if _, err := conn.Exec(ctx, begin).ReadAll(); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("import snapshot %q: %w", snapshot, err)
	}
	if err := r.readColumns(ctx); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return r, nil
}

// readColumns reads what the stream carries of the table: the columns
// pgoutput sends (on PostgreSQL 15+ those pg_publication_tables lists,
// its column list; no generated ones before 18, and from 18 on the stored
// ones publish_generated_columns or the column list names) and the
// publication's row filter.
func (r *SnapshotRead) readColumns(ctx context.Context) error {
	res := r.conn.ExecParams(ctx, `SELECT attname, attgenerated <> '' FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
		[][]byte{[]byte(r.q.Table.String())}, nil, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("read the columns of %s: %w", r.q.Table, res.Err)
	}
	listed, err := r.readPublication(ctx)
	if err != nil {
		return err
	}
	var selected []string
	for _, row := range res.Rows {
		name := string(row[0])
		r.tableColumns = append(r.tableColumns, name)
		generated := string(row[1]) == "t"
		sent := !generated
		if listed != nil {
			sent = listed[name] && (!generated || serverMajor(r.conn) >= 18)
		}
		if sent {
			selected = append(selected, pgx.Identifier{name}.Sanitize())
		}
	}
	if len(selected) == 0 {
		return fmt.Errorf("read the columns of %s: the publication sends none of them", r.q.Table)
	}
	r.selectList = "SELECT " + strings.Join(selected, ", ")
	rr := r.conn.ExecParams(ctx, r.selectList+" FROM "+r.q.Table.String()+" LIMIT 0", nil, nil, nil, nil)
	for rr.NextRow() {
	}
	// The field descriptions outlive the result (Read keeps them only
	// when there are rows).
	for _, f := range rr.FieldDescriptions() {
		r.columns = append(r.columns, SnapshotColumn{Name: f.Name, TypeOID: f.DataTypeOID})
	}
	if _, err := rr.Close(); err != nil {
		return fmt.Errorf("read the columns of %s: %w", r.q.Table, err)
	}
	return nil
}

// readPublication reads the publication's row filter on the table and
// its column list (nil for none). Servers before PostgreSQL 15 have
// neither.
func (r *SnapshotRead) readPublication(ctx context.Context) (map[string]bool, error) {
	if r.q.Publication == "" || serverMajor(r.conn) < 15 {
		return nil, nil
	}
	res := r.conn.ExecParams(ctx, `SELECT coalesce(pt.rowfilter, ''), a.attname
		FROM pg_publication_tables pt LEFT JOIN LATERAL unnest(pt.attnames) AS a(attname) ON true
		WHERE pt.pubname = $1 AND pt.schemaname = $2 AND pt.tablename = $3`,
		[][]byte{[]byte(r.q.Publication), []byte(r.q.Table.Schema), []byte(r.q.Table.Name)}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, fmt.Errorf("read the row filter and column list of publication %q: %w", r.q.Publication, res.Err)
	}
	var listed map[string]bool
	for _, row := range res.Rows {
		r.rowFilter = string(row[0])
		if row[1] != nil {
			if listed == nil {
				listed = map[string]bool{}
			}
			listed[string(row[1])] = true
		}
	}
	return listed, nil
}

// RowFilter is the publication's row filter on the table that the read
// applies besides the predicate, "" for none.
func (r *SnapshotRead) RowFilter() string { return r.rowFilter }

// Columns are the columns each row has, in table order: those pgoutput
// sends for the table (no generated column, only the publication's column
// list if it has one), so a row's values are what the stream would carry.
func (r *SnapshotRead) Columns() []SnapshotColumn { return r.columns }

// Check runs the predicate on no rows: a predicate PostgreSQL cannot
// parse or plan fails here with a *PredicateError.
func (r *SnapshotRead) Check(ctx context.Context) error {
	res := r.conn.ExecParams(ctx, r.selectList+r.from()+" LIMIT 0", nil, nil, nil, nil).Read()
	return r.predicateError(res.Err, utf8.RuneCountInString(r.selectList))
}

// Count counts the rows the predicate selects.
func (r *SnapshotRead) Count(ctx context.Context) (int64, error) {
	res := r.conn.ExecParams(ctx, "SELECT count(*)"+r.from(), nil, nil, nil, nil).Read()
	if err := r.predicateError(res.Err, len("SELECT count(*)")); err != nil {
		return 0, err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return 0, fmt.Errorf("count rows of %s: unexpected result", r.q.Table)
	}
	var n int64
	if _, err := fmt.Sscan(string(res.Rows[0][0]), &n); err != nil {
		return 0, fmt.Errorf("count rows of %s: %w", r.q.Table, err)
	}
	return n, nil
}

// Rows reads the selected rows in order and calls each with its text
// values (nil for NULL), which are valid only during the call. It stops
// at the first error each returns, or when ctx is done.
func (r *SnapshotRead) Rows(ctx context.Context, each func(values [][]byte) error) error {
	sql := r.selectList + r.from()
	if len(r.q.OrderBy) > 0 {
		order := make([]string, len(r.q.OrderBy))
		for i, c := range r.q.OrderBy {
			order[i] = pgx.Identifier{c}.Sanitize()
		}
		sql += " ORDER BY " + strings.Join(order, ", ")
	}
	rr := r.conn.ExecParams(ctx, sql, nil, nil, nil, nil)
	var eachErr error
	for eachErr == nil && rr.NextRow() {
		eachErr = each(rr.Values())
	}
	_, err := rr.Close()
	if eachErr != nil {
		return eachErr
	}
	if err := r.predicateError(err, utf8.RuneCountInString(r.selectList)); err != nil {
		return fmt.Errorf("read rows of %s: %w", r.q.Table, err)
	}
	return nil
}

// Commit ends the transaction.
func (r *SnapshotRead) Commit(ctx context.Context) error {
	if _, err := r.conn.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		return fmt.Errorf("end the snapshot read: %w", err)
	}
	return nil
}

// Close closes the connection, rolling back a transaction still open.
func (r *SnapshotRead) Close(ctx context.Context) { r.conn.Close(ctx) }

// predicateClass reports whether an SQLSTATE is about the query itself
// (and so about the predicate, the only part the operator wrote) rather
// than the connection, the server or a limit.
func predicateClass(code string) bool {
	switch code[:min(2, len(code))] {
	case "0A", "21", "22", "25", "42": // unsupported, cardinality, data, read-only, syntax or access
		return true
	}
	return false
}

// predicateError explains a server error about a query whose predicate
// starts after selectLen characters of SELECT list.
func (r *SnapshotRead) predicateError(err error, selectLen int) error {
	var pgErr *pgconn.PgError
	if err == nil || !errors.As(err, &pgErr) || !predicateClass(pgErr.Code) {
		return err
	}
	problem := fmt.Sprintf("is refused by PostgreSQL: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	fix := "correct the predicate; it runs as SELECT * FROM " + r.q.Table.String() + " WHERE (<predicate>)"
	switch pgErr.Code {
	case "42601": // syntax error
		start := utf8.RuneCountInString(r.q.wherePrefix()) + selectLen
		switch at := int(pgErr.Position) - start; {
		case at >= 1 && at <= utf8.RuneCountInString(r.q.Where):
			problem = fmt.Sprintf("has a syntax error at character %d: %s (SQLSTATE %s)", at, pgErr.Message, pgErr.Code)
		case at > 0:
			problem = fmt.Sprintf("has a syntax error at its end (it is incomplete): %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		default:
			problem = fmt.Sprintf("has a syntax error: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		}
	case "42703": // undefined column
		names := make([]string, len(r.tableColumns))
		for i, c := range r.tableColumns {
			names[i] = pgx.Identifier{c}.Sanitize()
		}
		problem = fmt.Sprintf("names a column %s does not have: %s (SQLSTATE %s)", r.q.Table, pgErr.Message, pgErr.Code)
		fix = "use one of its columns: " + strings.Join(names, ", ") + " (mixed-case names need double quotes, as in \"ProcessedAt\")"
	case "25006": // read-only transaction
		fix = "the predicate must only read: it runs in a read-only transaction"
	}
	return &PredicateError{Where: r.q.Where, Problem: problem, Fix: fix}
}
