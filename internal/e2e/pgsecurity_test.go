package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/pgcluster"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// withURL returns dsn with its user replaced (if user is not "") and the
// query parameters in kv (name, value, name, value, ...) set.
func withURL(t *testing.T, dsn, user string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		u.User = url.User(user)
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// verifyFull is dsn with sslmode=verify-full against the CA in caFile.
func verifyFull(t *testing.T, dsn, caFile string) string {
	t.Helper()
	return withURL(t, dsn, "", "sslmode", "verify-full", "sslrootcert", caFile)
}

// newTLSEnv is newEnv on a private cluster that accepts TCP only over TLS,
// with a certificate for hosts (default 127.0.0.1 and localhost).
func newTLSEnv(t *testing.T, hosts ...string) *env {
	t.Helper()
	pg := pgtest.Start(t, pgtest.WithTLS(pgcluster.TLSOptions{Hosts: hosts, Require: true}))
	if pg.CAFile() == "" {
		t.Fatal("TLS server has no CA file")
	}
	return newEnv(t, pg, true)
}

// streamSome writes n events and checks they all reach the stream.
func (e *env) streamSome(n int) {
	e.t.Helper()
	check := checker.New()
	w := e.newWriter(check, 3)
	for range n {
		if _, err := w.tx(context.Background(), 1, true); err != nil {
			e.t.Fatal(err)
		}
	}
	e.verify(e.js(), check, time.Minute)
}

// expectRefused runs outboxd with args and checks that it exits non-zero
// with every string of want in its output: a refused certificate or a
// refused connection is not something a retry can fix.
func (e *env) expectRefused(args []string, want ...string) {
	e.t.Helper()
	e.expectExit(args, want...)
}

// TestPGTLSVerifyFull: with sslmode=verify-full and the server's CA, outboxd
// streams end to end, and its replication connection is encrypted.
func TestPGTLSVerifyFull(t *testing.T) {
	e := newTLSEnv(t)
	e.dsn = verifyFull(t, e.dsn, e.pg.CAFile())
	p := e.start(e.args()...)
	e.waitStreaming(p)
	e.streamSome(20)

	var ssl bool
	var version string
	if err := e.connect().QueryRow(context.Background(), `SELECT s.ssl, s.version FROM pg_stat_replication r
		JOIN pg_stat_ssl s ON s.pid = r.pid WHERE r.application_name = 'outboxd'`).Scan(&ssl, &version); err != nil {
		t.Fatal(err)
	}
	if !ssl {
		t.Error("outboxd's replication connection is not encrypted")
	}
	t.Logf("replication connection: ssl=%v %s", ssl, version)
	if code := p.stop(30 * time.Second); code != 0 {
		t.Errorf("outboxd exited %d after SIGTERM", code)
	}
}

// TestPGTLSNoTLSRefused: a server that requires TLS refuses outboxd with
// sslmode=disable, and outboxd stops (pg_hba rejection is SQLSTATE 28000).
func TestPGTLSNoTLSRefused(t *testing.T) {
	e := newTLSEnv(t)
	args := e.args()
	args[2] = withURL(t, e.dsn, "", "sslmode", "disable")
	e.expectExit(args, "no pg_hba.conf entry", "no encryption")
}

// TestPGTLSWrongCA: a server certificate that another CA signed is refused
// with an error naming the unknown authority.
func TestPGTLSWrongCA(t *testing.T) {
	e := newTLSEnv(t)
	other, err := pgcluster.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(t.TempDir(), "other-ca.crt")
	if err := os.WriteFile(wrong, other.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := verifyFull(t, e.dsn, wrong)
	checkTLSError(t, bad, "certificate signed by unknown authority")
	args := e.args()
	args[2] = bad
	e.expectRefused(args, "tls: failed to verify certificate", "certificate signed by unknown authority")
}

// TestPGTLSWrongHost: verify-full refuses a certificate that does not name
// the host connected to, either way round.
func TestPGTLSWrongHost(t *testing.T) {
	tests := []struct {
		name  string
		hosts []string // the certificate's names
		host  string   // the one connected to
		want  string
	}{
		{name: "IP not in cert", hosts: []string{"db.example"}, host: "127.0.0.1",
			want: "cannot validate certificate for 127.0.0.1"},
		{name: "name not in cert", hosts: []string{"127.0.0.1"}, host: "localhost",
			want: "wanted to match localhost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTLSEnv(t, tt.hosts...)
			u, err := url.Parse(verifyFull(t, e.dsn, e.pg.CAFile()))
			if err != nil {
				t.Fatal(err)
			}
			u.Host = tt.host + ":" + u.Port()
			checkTLSError(t, u.String(), tt.want)
			args := e.args()
			args[2] = u.String()
			e.expectRefused(args, "tls: failed to verify certificate", tt.want)
		})
	}
}

// checkTLSError connects to dsn directly and checks the error says want and
// unwraps to *tls.CertificateVerificationError, which is what outboxd's
// error classification can match on.
func checkTLSError(t *testing.T, dsn, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err == nil {
		conn.Close(ctx)
		t.Fatal("connected, want a certificate verification failure")
	}
	var certErr *tls.CertificateVerificationError
	if !errors.As(err, &certErr) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v (%T), want a *tls.CertificateVerificationError mentioning %q", err, err, want)
	}
}

const relayRole = "outboxd_relay"

// newRoleEnv is newEnv on a private cluster (roles are cluster-wide) with
// the migrations applied by `outboxd migrate --role`, run twice: by flag,
// then by environment variable, which must change nothing.
func newRoleEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, pgtest.Start(t), false)
	out := e.runOK("migrate", "--pg-url", e.dsn, "--role", relayRole)
	if !strings.Contains(out, "applied 0001_outbox.sql") || !strings.Contains(out, "role "+relayRole) {
		t.Errorf("first migrate output:\n%s", out)
	}
	t.Setenv("OUTBOXD_ROLE", relayRole)
	if out := e.runOK("migrate", "--pg-url", e.dsn); !strings.Contains(out, "role "+relayRole) {
		t.Errorf("second migrate output:\n%s", out)
	}
	return e
}

// runOK runs outboxd to completion and fails the test unless it exits 0.
func (e *env) runOK(args ...string) string {
	e.t.Helper()
	p := e.start(args...)
	if code := p.wait(time.Minute); code != 0 {
		e.t.Fatalf("outboxd %v exited %d:\n%s", args, code, tail(p.output.String(), 30))
	}
	return p.output.String()
}

// TestLeastPrivilegeRole: outboxd runs end to end as the role that
// `outboxd migrate --role` made, which is no superuser.
func TestLeastPrivilegeRole(t *testing.T) {
	e := newRoleEnv(t)
	args := e.args("--heartbeat-interval", "1s")
	args[2] = withURL(t, e.dsn, relayRole)
	p := e.start(args...)
	e.waitStreaming(p)
	e.streamSome(20)

	conn := e.connect()
	var user string
	if err := conn.QueryRow(context.Background(),
		"SELECT usename FROM pg_stat_replication WHERE application_name = 'outboxd'").Scan(&user); err != nil {
		t.Fatal(err)
	}
	if user != relayRole {
		t.Errorf("walsender runs as %q, want %q", user, relayRole)
	}
	time.Sleep(2 * time.Second) // let a heartbeat or two run as the role
	if out := p.output.String(); strings.Contains(out, "permission denied") || strings.Contains(out, "42501") {
		t.Errorf("outboxd hit a permission error as %s:\n%s", relayRole, tail(out, 30))
	}
	if code := p.stop(30 * time.Second); code != 0 {
		t.Errorf("outboxd exited %d after SIGTERM", code)
	}
}

// TestLeastPrivilegeRoleDenied: the role may read the outbox but not a
// business table, may not write the outbox and may not create tables.
func TestLeastPrivilegeRoleDenied(t *testing.T) {
	e := newRoleEnv(t)
	ctx := context.Background()
	admin := e.connect()
	if _, err := admin.Exec(ctx, "CREATE TABLE business (id int PRIMARY KEY, secret text); INSERT INTO business VALUES (1, 'x')"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, withURL(t, e.dsn, relayRole))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM public.outbox").Scan(&n); err != nil {
		t.Errorf("read outbox as %s: %v", relayRole, err)
	}
	tests := []struct {
		name string
		sql  string
	}{
		{name: "read business table", sql: "SELECT secret FROM business"},
		{name: "insert into outbox", sql: `INSERT INTO public.outbox (id, aggregate_type, aggregate_id, event_type, payload)
			VALUES (gen_random_uuid(), 'a', '1', 'T', '{}')`},
		{name: "delete from outbox", sql: "DELETE FROM public.outbox"},
		{name: "create table", sql: "CREATE TABLE public.mine (id int)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := conn.Exec(ctx, tt.sql)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
				t.Fatalf("err = %v, want permission denied (SQLSTATE 42501)", err)
			}
		})
	}
	var super, createRole, createDB bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user").
		Scan(&super, &createRole, &createDB); err != nil {
		t.Fatal(err)
	}
	if super || createRole || createDB {
		t.Errorf("role has superuser=%v createrole=%v createdb=%v, want none", super, createRole, createDB)
	}
}
