package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/migrations"
)

func TestEnsureRole(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Shared(t)
	dsn := srv.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := "r_" + cfg.Database // roles are per cluster: make it unique
	t.Cleanup(func() {
		srv.Exec(t, dsn, "DROP OWNED BY "+pgx.Identifier{name}.Sanitize())
		srv.Exec(t, dsn, "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
	})
	for range 2 { // the second run changes nothing and does not fail
		if err := migrations.EnsureRole(ctx, conn, migrations.Role{Name: name, Password: "it's secret"}); err != nil {
			t.Fatal(err)
		}
	}
	var login, repl, super, createRole, createDB, selectOutbox, insertOutbox, createSchema bool
	if err := conn.QueryRow(ctx, `SELECT rolcanlogin, rolreplication, rolsuper, rolcreaterole, rolcreatedb,
			has_table_privilege($1, 'public.outbox', 'SELECT'),
			has_table_privilege($1, 'public.outbox', 'INSERT,UPDATE,DELETE,TRUNCATE'),
			has_schema_privilege($1, 'public', 'CREATE')
		FROM pg_roles WHERE rolname = $1`, name).Scan(&login, &repl, &super, &createRole, &createDB,
		&selectOutbox, &insertOutbox, &createSchema); err != nil {
		t.Fatal(err)
	}
	if !login || !repl || super || createRole || createDB || !selectOutbox || insertOutbox {
		t.Errorf("login=%v replication=%v super=%v createrole=%v createdb=%v select=%v write=%v; "+
			"want LOGIN REPLICATION and SELECT only", login, repl, super, createRole, createDB, selectOutbox, insertOutbox)
	}
	var major int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&major); err != nil {
		t.Fatal(err)
	}
	if createSchema && major >= 15 { // before 15, PUBLIC itself has CREATE on schema public
		t.Error("role may CREATE in schema public")
	}
	var hasPassword bool
	if err := conn.QueryRow(ctx, "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = $1", name).Scan(&hasPassword); err != nil {
		t.Fatal(err)
	}
	if !hasPassword {
		t.Error("password not set")
	}
}

func TestEnsureRoleErrors(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Shared(t)
	conn, err := pgx.Connect(ctx, srv.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&super); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		role    migrations.Role
		wantErr string
	}{
		{name: "no name", role: migrations.Role{}, wantErr: "a name is required"},
		{name: "superuser", role: migrations.Role{Name: super}, wantErr: "is a superuser"},
		{name: "bad table", role: migrations.Role{Name: "x", Table: pgx.Identifier{"outbox"}}, wantErr: "want schema.table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := migrations.EnsureRole(ctx, conn, tt.role)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
	// Without the table (migrations not applied), the grant fails and
	// the role is not left half made.
	err = migrations.EnsureRole(ctx, conn, migrations.Role{Name: "r_never_made"})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Fatalf("err = %v, want undefined_table", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = 'r_never_made'").Scan(&n); err != nil || n != 0 {
		t.Errorf("role left behind: count=%d err=%v", n, err)
	}
}
