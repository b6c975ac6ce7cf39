package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testenv/pgcluster"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func queryString(t *testing.T, dsn, sql string, args ...any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func databaseExists(t *testing.T, s *Server, dsn string) bool {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return queryString(t, s.DSN("postgres"),
		"SELECT count(*)::text FROM pg_database WHERE datname = $1", cfg.Database) == "1"
}

func TestShared(t *testing.T) {
	s := Shared(t)
	if Shared(t) != s {
		t.Fatal("second Shared call returned another server")
	}
	if got := queryString(t, s.DSN("postgres"), "SHOW wal_level"); got != "logical" {
		t.Errorf("wal_level = %q, want logical", got)
	}
	a, b := s.NewDatabase(t), s.NewDatabase(t)
	if a == b {
		t.Fatalf("NewDatabase returned %s twice", a)
	}
	s.Exec(t, a, "CREATE TABLE only_in_a (id int)")
	if got := queryString(t, b, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'only_in_a'"); got != "0" {
		t.Error("a table made in one new database is visible in another")
	}
}

func TestNewDatabaseCleanupOnShared(t *testing.T) {
	s := Shared(t)
	var dsn string
	t.Run("user", func(t *testing.T) {
		dsn = s.NewDatabase(t)
		// A slot and an open session would each make a plain DROP DATABASE fail.
		s.Exec(t, dsn, "SELECT pg_create_logical_replication_slot('cleanup_test', 'pgoutput')")
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
	})
	if databaseExists(t, s, dsn) {
		t.Errorf("database of %s still exists after its test", dsn)
	}
}

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	dsn := s.NewDatabase(t)
	s.Exec(t, dsn, "CREATE TABLE kept (v text)")
	s.Exec(t, dsn, "INSERT INTO kept VALUES ($1)", "x")
	s.Stop(t, "immediate")
	s.Restart(t)
	s.Restart(t) // of a running server
	if got := queryString(t, dsn, "SELECT v FROM kept"); got != "x" {
		t.Errorf("after restart v = %q, want x", got)
	}
}

func TestWithConf(t *testing.T) {
	s := Start(t, WithConf("work_mem", "8MB"))
	if got := queryString(t, s.DSN("postgres"), "SHOW work_mem"); got != "8MB" {
		t.Errorf("work_mem = %q, want 8MB", got)
	}
}

func TestExternalURL(t *testing.T) {
	base := Shared(t)
	t.Setenv(EnvURL, base.DSN("postgres"))

	s := Start(t)
	if s.cluster != nil {
		t.Fatal("Start with EnvURL set made its own cluster")
	}
	var dsn string
	t.Run("database", func(t *testing.T) {
		dsn = s.NewDatabase(t)
		if !strings.HasPrefix(dsn, strings.TrimSuffix(base.DSN("x"), "x?sslmode=disable")) {
			t.Errorf("DSN %s is not on the server from %s", dsn, EnvURL)
		}
		s.Exec(t, dsn, "SELECT 1")
	})
	if databaseExists(t, base, dsn) {
		t.Error("database on the external server was not dropped")
	}

	for name, f := range map[string]func(t *testing.T){
		"Stop":     func(t *testing.T) { s.Stop(t, "fast") },
		"Restart":  func(t *testing.T) { s.Restart(t) },
		"WithConf": func(t *testing.T) { Start(t, WithConf("work_mem", "8MB")) },
	} {
		var inner *testing.T
		t.Run(name, func(t *testing.T) { inner = t; f(t) })
		if !inner.Skipped() {
			t.Errorf("%s on an external server did not skip", name)
		}
	}
}

func TestExternalURLErrors(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		wantErr string
	}{
		{name: "not a URL", url: "host=localhost password=secret", wantErr: "want a URL"},
		{name: "unreachable", url: "postgres://u:secret@127.0.0.1:1/db?connect_timeout=2", wantErr: EnvURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := external(tt.url)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestDatabaseName(t *testing.T) {
	long := strings.Repeat("TestSomething/with spaces", 10)
	a, b := databaseName(long), databaseName(long)
	if a == b {
		t.Errorf("databaseName gave %s twice", a)
	}
	if len(a) > 63 {
		t.Errorf("len(%s) = %d, want at most 63", a, len(a))
	}
	if strings.Trim(a, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		t.Errorf("%s has characters that need quoting", a)
	}
}

func TestWithTLS(t *testing.T) {
	s := Start(t, WithTLS(pgcluster.TLSOptions{Require: true}))
	if s.CAFile() == "" {
		t.Fatal("CAFile is empty on a server started WithTLS")
	}
	dsn := strings.Replace(s.NewDatabase(t), "sslmode=require", "sslmode=verify-full&sslrootcert="+s.CAFile(), 1)
	if got := queryString(t, dsn, "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()"); got != "true" {
		t.Errorf("pg_stat_ssl.ssl = %s, want true", got)
	}
	if Shared(t).CAFile() != "" {
		t.Error("CAFile of a server without TLS is not empty")
	}
}

func TestWantedMajor(t *testing.T) {
	tests := []struct {
		env     string
		want    int
		wantErr string
	}{
		{env: "", want: 0},
		{env: "14", want: 14},
		{env: "18", want: 18},
		{env: "13", wantErr: "from 14 to 18"},
		{env: "17.2", wantErr: `"17.2": want a PostgreSQL major`},
		{env: "latest", wantErr: `"latest"`},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(EnvVersion, tt.env)
			got, err := wantedMajor()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), EnvVersion) {
					t.Fatalf("wantedMajor() = %d, %v; want an error naming %s and %q", got, err, EnvVersion, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("wantedMajor() = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestVersionMismatchRefused: a server of another major than EnvVersion's
// fails the start, so a matrix run never passes on the wrong version.
func TestVersionMismatchRefused(t *testing.T) {
	if os.Getenv(EnvURL) != "" {
		t.Skipf("starts a private cluster; %s is set", EnvURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := &Server{cluster: c, dsn: c.DSN, admin: c.DSN("postgres"), close: c.Close}
	num := queryString(t, c.DSN("postgres"), "SHOW server_version_num")
	major, _ := strconv.Atoi(num[:len(num)-4])
	if err := s.checkMajor(major); err != nil {
		t.Fatalf("checkMajor(%d) on PostgreSQL %s: %v", major, num, err)
	}
	other := major + 1
	err = s.checkMajor(other)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s=%d, but the server is PostgreSQL %d", EnvVersion, other, major)) {
		t.Fatalf("checkMajor(%d) on PostgreSQL %d = %v; want a mismatch error", other, major, err)
	}
}
