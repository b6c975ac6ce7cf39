package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Table is a schema-qualified table name, unquoted.
type Table struct {
	Schema string
	Name   string
}

// String returns the name quoted as SQL would need it.
func (t Table) String() string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }

// ParseTable reads "schema.table", "table" (schema public) or the quoted
// forms ("My Schema"."Outbox"). Unquoted parts are folded to lower case, as
// PostgreSQL does.
func ParseTable(s string) (Table, error) {
	parts, err := splitIdentifier(s)
	if err != nil {
		return Table{}, fmt.Errorf("table %q: %w; use schema.table, e.g. public.outbox", s, err)
	}
	switch len(parts) {
	case 1:
		return Table{Schema: "public", Name: parts[0]}, nil
	case 2:
		return Table{Schema: parts[0], Name: parts[1]}, nil
	}
	return Table{}, fmt.Errorf("table %q has %d dot-separated parts; use schema.table, e.g. public.outbox", s, len(parts))
}

func splitIdentifier(s string) ([]string, error) {
	var parts []string
	for i := 0; ; {
		var part string
		if i < len(s) && s[i] == '"' {
			var b strings.Builder
			i++
			for {
				if i >= len(s) {
					return nil, errors.New("unterminated quoted identifier")
				}
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(s[i])
				i++
			}
			part = b.String()
		} else {
			j := strings.IndexByte(s[i:], '.')
			if j < 0 {
				j = len(s) - i
			}
			part = strings.ToLower(strings.TrimSpace(s[i : i+j]))
			i += j
		}
		if part == "" {
			return nil, errors.New("empty name")
		}
		parts = append(parts, part)
		if i == len(s) {
			return parts, nil
		}
		if s[i] != '.' {
			return nil, fmt.Errorf("unexpected %q after a quoted name", s[i])
		}
		i++
	}
}

// PreflightConfig names what Preflight checks.
type PreflightConfig struct {
	Slot        string
	Publication string
	// Table is the outbox table; the zero Table means none (events come
	// only as logical messages), and then the publication must hold no
	// table, whose rows outboxd would not publish.
	Table Table
	// CheckColumns, when set, checks the table's columns as the catalog
	// lists them (in column order); its error is returned as it is.
	CheckColumns func([]Column) error
	// Read names the columns outboxd reads (mapped ones, subject
	// placeholders). On PostgreSQL 15+, a publication column list must not
	// leave out any of those that are columns of the table: the Relation
	// message would lack it, and the first row would stop outboxd.
	Read []string
}

// Column is one column of the outbox table as the catalog has it.
type Column struct {
	// Name is the column's name, exact (case-sensitive).
	Name string
	// Type is the OID of the column's type (pg_attribute.atttypid), as a
	// pgoutput Relation message sends it.
	Type uint32
}

// SlotState is what the server knows about the replication slot.
type SlotState struct {
	Exists         bool
	ConfirmedFlush pglogrepl.LSN
	Active         bool
}

// Preflight checks, on a normal (non-replication) connection, everything
// that must hold before streaming: wal_level, the publication and its table,
// the table's columns, and the slot if it exists. Each failure is a
// *PreflightError that names the object and the fix.
func Preflight(ctx context.Context, conn *pgx.Conn, cfg PreflightConfig) (SlotState, error) {
	checks := []func(context.Context, *pgx.Conn, PreflightConfig) error{
		checkWALLevel, checkTable, checkPublication,
	}
	for _, check := range checks {
		if err := check(ctx, conn, cfg); err != nil {
			return SlotState{}, err
		}
	}
	return checkSlot(ctx, conn, cfg)
}

func checkWALLevel(ctx context.Context, conn *pgx.Conn, _ PreflightConfig) error {
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if level != "logical" {
		return &PreflightError{
			Object:  "server setting wal_level",
			Problem: fmt.Sprintf("is %q, logical replication needs \"logical\"", level),
			Fix:     "set wal_level = logical in postgresql.conf (ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL",
		}
	}
	return nil
}

// readColumns lists a table's columns in order; none when it does not exist.
func readColumns(ctx context.Context, conn *pgx.Conn, table Table) ([]Column, error) {
	rows, err := conn.Query(ctx, `
		SELECT a.attname, a.atttypid FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`,
		table.Schema, table.Name)
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", table, err)
	}
	cols, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Column, error) {
		var c Column
		err := row.Scan(&c.Name, &c.Type)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", table, err)
	}
	return cols, nil
}

func checkTable(ctx context.Context, conn *pgx.Conn, cfg PreflightConfig) error {
	if cfg.Table == (Table{}) {
		return nil
	}
	have, err := readColumns(ctx, conn, cfg.Table)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		return &PreflightError{
			Object:  "table " + cfg.Table.String(),
			Problem: "does not exist",
			Fix:     "run `outboxd migrate` to create the default outbox table, or point --table at your table (quote mixed-case names: '\"Sales\".\"Outbox\"')",
		}
	}
	if cfg.CheckColumns != nil {
		return cfg.CheckColumns(have)
	}
	return nil
}

func checkPublication(ctx context.Context, conn *pgx.Conn, cfg PreflightConfig) error {
	object := fmt.Sprintf("publication %q", cfg.Publication)
	var inserts bool
	err := conn.QueryRow(ctx, "SELECT pubinsert FROM pg_publication WHERE pubname = $1", cfg.Publication).Scan(&inserts)
	if errors.Is(err, pgx.ErrNoRows) {
		return &PreflightError{Object: object, Problem: "does not exist",
			Fix: fmt.Sprintf("run `outboxd migrate`, or CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')",
				pgx.Identifier{cfg.Publication}.Sanitize(), cfg.Table)}
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", object, err)
	}
	if cfg.Table == (Table{}) {
		return checkNoTables(ctx, conn, cfg.Publication)
	}
	if !inserts {
		return &PreflightError{Object: object, Problem: "does not publish inserts",
			Fix: fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert')", pgx.Identifier{cfg.Publication}.Sanitize())}
	}
	var covered bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication_tables
		WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)`,
		cfg.Publication, cfg.Table.Schema, cfg.Table.Name).Scan(&covered); err != nil {
		return fmt.Errorf("read tables of %s: %w", object, err)
	}
	if !covered {
		return &PreflightError{Object: object, Problem: "does not contain table " + cfg.Table.String(),
			Fix: fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s", pgx.Identifier{cfg.Publication}.Sanitize(), cfg.Table)}
	}
	return checkColumnList(ctx, conn, cfg)
}

// checkColumnList checks that a publication column list (PostgreSQL 15+)
// publishes every column outboxd reads.
func checkColumnList(ctx context.Context, conn *pgx.Conn, cfg PreflightConfig) error {
	if len(cfg.Read) == 0 {
		return nil
	}
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("read server_version_num: %w", err)
	}
	if version < 150000 {
		return nil // column lists came with PostgreSQL 15
	}
	var published []string
	if err := conn.QueryRow(ctx, `SELECT attnames FROM pg_publication_tables
		WHERE pubname = $1 AND schemaname = $2 AND tablename = $3`,
		cfg.Publication, cfg.Table.Schema, cfg.Table.Name).Scan(&published); err != nil {
		return fmt.Errorf("read the column list of publication %q: %w", cfg.Publication, err)
	}
	cols, err := readColumns(ctx, conn, cfg.Table)
	if err != nil {
		return err
	}
	for _, name := range cfg.Read {
		isColumn := slices.ContainsFunc(cols, func(c Column) bool { return c.Name == name })
		if isColumn && !slices.Contains(published, name) {
			pub := pgx.Identifier{cfg.Publication}.Sanitize()
			return &PreflightError{
				Object: fmt.Sprintf("publication %q", cfg.Publication),
				Problem: fmt.Sprintf("publishes only the columns %s of table %s, not %q, which outboxd reads (--columns or --subject)",
					strings.Join(published, ", "), cfg.Table, name),
				Fix: fmt.Sprintf("publish every column: ALTER PUBLICATION %s DROP TABLE %s; ALTER PUBLICATION %s ADD TABLE %s", pub, cfg.Table, pub, cfg.Table),
			}
		}
	}
	return nil
}

// checkNoTables checks that a publication streamed without an outbox
// table holds no table: rows written there would never be published.
func checkNoTables(ctx context.Context, conn *pgx.Conn, publication string) error {
	rows, err := conn.Query(ctx, `SELECT schemaname, tablename FROM pg_publication_tables
		WHERE pubname = $1 ORDER BY 1, 2 LIMIT 6`, publication)
	if err != nil {
		return fmt.Errorf("read tables of publication %q: %w", publication, err)
	}
	tables, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var t Table
		err := row.Scan(&t.Schema, &t.Name)
		return t.String(), err
	})
	if err != nil {
		return fmt.Errorf("read tables of publication %q: %w", publication, err)
	}
	if len(tables) == 0 {
		return nil
	}
	list := strings.Join(tables, ", ")
	if len(tables) > 5 {
		list = strings.Join(tables[:5], ", ") + ", ..."
	}
	return &PreflightError{Object: fmt.Sprintf("publication %q", publication),
		Problem: "contains tables (" + list + ") but no outbox table is set (--table is empty): their rows would not be published",
		Fix: fmt.Sprintf("use a publication without tables (CREATE PUBLICATION %s_messages) or set --table to the outbox table",
			publication)}
}

func checkSlot(ctx context.Context, conn *pgx.Conn, cfg PreflightConfig) (SlotState, error) {
	object := fmt.Sprintf("replication slot %q", cfg.Slot)
	slot, err := InspectSlot(ctx, conn, cfg.Slot)
	if errors.Is(err, ErrSlotNotFound) {
		return SlotState{}, nil
	}
	if err != nil {
		return SlotState{}, err
	}
	drop := fmt.Sprintf("`outboxd slot drop --slot %s` (events not yet published are lost) or use another --slot", cfg.Slot)
	problem := slot.Usable()
	switch {
	case problem == "":
		return SlotState{Exists: true, Active: slot.Active, ConfirmedFlush: slot.ConfirmedFlush}, nil
	case slot.Type != "logical" || slot.Plugin != Plugin:
		drop = fmt.Sprintf("SELECT pg_drop_replication_slot('%s') if no other tool reads it, or use another --slot", cfg.Slot)
	case slot.Database != slot.ConnectedDatabase:
		drop = "connect --pg-url to the slot's database or use another --slot"
	case slot.WALStatus == "lost":
		problem += ", events since its position are gone"
		drop += "; then republish the missing rows (outboxd cannot recover them from WAL)"
	}
	return SlotState{}, &PreflightError{Object: object, Problem: problem, Fix: drop}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
