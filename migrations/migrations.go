package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed *.sql
var files embed.FS

// Migration is one embedded SQL file, named NNNN_description.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, name := range names {
		prefix, _, ok := strings.Cut(name, "_")
		version, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			return nil, fmt.Errorf("BUG: migration file %q is not named NNNN_description.sql", name)
		}
		body, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: version, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Apply runs every migration not yet recorded, each in its own transaction,
// and returns the names of those it applied. A session-level advisory lock
// keeps two concurrent runs from applying the same version twice.
func Apply(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	const lockKey = 0x6f7574626f78 // "outbox"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return nil, fmt.Errorf("lock migrations: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey) //nolint:errcheck // released with the session anyway

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS outboxd_schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("create migrations table: %w", err)
	}
	var applied []string
	for _, m := range all {
		done, err := apply(ctx, conn, m)
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if done {
			applied = append(applied, m.Name)
		}
	}
	return applied, nil
}

func apply(ctx context.Context, conn *pgx.Conn, m Migration) (bool, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit

	var exists bool
	if err := tx.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM outboxd_schema_migrations WHERE version = $1)", m.Version).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx,
		"INSERT INTO outboxd_schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}
