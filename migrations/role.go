package migrations

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// OutboxTable is the table the migrations create and the publication
// "outboxd" contains.
var OutboxTable = pgx.Identifier{"public", "outbox"}

// Role describes the least-privileged role outboxd runs as.
type Role struct {
	// Name is the role's name. Required.
	Name string
	// Password, if not empty, is set as the role's password. It may be a
	// SCRAM verifier (SCRAM-SHA-256$...), which the server stores as is.
	// Default: leave the password alone (the operator sets it, e.g. with
	// psql's \password, which never sends it in clear text).
	Password string
	// Table is the table outboxd reads. Default: OutboxTable.
	Table pgx.Identifier
}

// EnsureRole creates role r (or updates it if it exists) with LOGIN and
// REPLICATION, and grants it USAGE on the table's schema and SELECT on the
// table: all that outboxd needs to create its slot, stream from the
// publication and run its preflight checks. It grants nothing else. It
// refuses to change a role that is a superuser, since dropping that
// attribute is the operator's decision. Running it again changes nothing.
func EnsureRole(ctx context.Context, conn *pgx.Conn, r Role) error {
	if r.Name == "" {
		return errors.New("role: a name is required")
	}
	table := r.Table
	if len(table) == 0 {
		table = OutboxTable
	}
	if len(table) != 2 {
		return fmt.Errorf("role %s: table %s: want schema.table", r.Name, table.Sanitize())
	}
	role := pgx.Identifier{r.Name}.Sanitize()

	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("role %s: %w", r.Name, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit

	var super bool
	err = tx.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = $1", r.Name).Scan(&super)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// A concurrent migrate may create it first; a savepoint lets the
		// duplicate_object error fall through to ALTER ROLE.
		if _, err := tx.Exec(ctx, "SAVEPOINT create_role"); err != nil {
			return fmt.Errorf("role %s: %w", r.Name, err)
		}
		_, err = tx.Exec(ctx, "CREATE ROLE "+role+" LOGIN REPLICATION")
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" {
			_, err = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT create_role")
		}
		if err != nil {
			return fmt.Errorf("create role %s: %w", r.Name, err)
		}
	case err != nil:
		return fmt.Errorf("role %s: %w", r.Name, err)
	case super:
		return fmt.Errorf("role %s is a superuser: outboxd needs only LOGIN REPLICATION; "+
			"run ALTER ROLE %s NOSUPERUSER yourself if that is what you want, or choose another --role", r.Name, role)
	}
	stmts := []string{
		"ALTER ROLE " + role + " LOGIN REPLICATION",
		"GRANT USAGE ON SCHEMA " + pgx.Identifier{table[0]}.Sanitize() + " TO " + role,
		"GRANT SELECT ON TABLE " + table.Sanitize() + " TO " + role,
	}
	for _, sql := range stmts {
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("role %s: %s: %w", r.Name, sql, err)
		}
	}
	if r.Password != "" {
		// Utility statements take no parameters: let the server quote the
		// literal, and never put the password in an error.
		var sql string
		if err := tx.QueryRow(ctx, "SELECT format('ALTER ROLE %I PASSWORD %L', $1::text, $2::text)",
			r.Name, r.Password).Scan(&sql); err != nil {
			return fmt.Errorf("role %s: quote password: %w", r.Name, err)
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) {
				return fmt.Errorf("role %s: set password: %s (SQLSTATE %s)", r.Name, pgErr.Message, pgErr.Code)
			}
			return fmt.Errorf("role %s: set password failed", r.Name)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("role %s: %w", r.Name, err)
	}
	return nil
}
