package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/outboxd/outboxd/internal/testenv/pgcluster"
	"github.com/outboxd/outboxd/migrations"
)

// EnvURL names the environment variable that points the tests at an
// existing server, as a postgres:// URL, instead of starting one.
const EnvURL = "OUTBOXD_TEST_PG_URL"

// EnvVersion names the environment variable that chooses the PostgreSQL
// major (14 to 18) of the servers the tests start: its binaries come from
// pgcluster.BinDirFor (scripts/ensure-postgres MAJOR installs them), and
// every server, however it was made, is checked to be that major. Unset:
// the default binaries (pgcluster.Options.BinDir).
const EnvVersion = "OUTBOXD_TEST_PG_VERSION"

const timeout = time.Minute // for each setup step

// Option changes the private cluster that Start makes.
type Option func(*pgcluster.Options)

// WithConf sets a postgresql.conf setting. A test that uses it is skipped
// when the server comes from EnvURL, whose settings the tests cannot change.
func WithConf(name, value string) Option {
	return func(o *pgcluster.Options) {
		if o.ExtraConf == nil {
			o.ExtraConf = map[string]string{}
		}
		o.ExtraConf[name] = value
	}
}

// WithTLS turns on TLS with a server certificate for opts.Hosts signed by a
// CA made for the cluster (Server.CAFile). A test that uses it is skipped
// when the server comes from EnvURL, and fails where only Docker is there.
func WithTLS(opts pgcluster.TLSOptions) Option {
	return func(o *pgcluster.Options) { o.TLS = &opts }
}

// Server is a PostgreSQL server for tests. Its methods are safe for
// concurrent use.
type Server struct {
	cluster *pgcluster.Cluster // nil for an external or Docker server
	dsn     func(database string) string
	admin   string       // DSN of the database that NewDatabase connects to
	fixed   string       // why Stop and Restart cannot work, if cluster is nil
	close   func() error // stops what start started
	shared  bool
}

// Start gives the calling test a server of its own, which t.Cleanup stops;
// if the test failed, the tail of the server's log is logged first. Its
// Stop and Restart work, except for a server from EnvURL or Docker.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var o pgcluster.Options
	for _, opt := range opts {
		opt(&o)
	}
	if os.Getenv(EnvURL) != "" && len(o.ExtraConf) > 0 {
		t.Skipf("needs server settings %v, which cannot be set on the server from %s", o.ExtraConf, EnvURL)
	}
	if os.Getenv(EnvURL) != "" && o.TLS != nil {
		t.Skipf("needs a server with a TLS certificate of its own, which the server from %s does not have", EnvURL)
	}
	s, err := start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.close(); err != nil {
			t.Errorf("stop postgres: %v", err)
		}
	})
	s.logOnFailure(t)
	return s
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the test package's server, starting it on first use. Main
// stops it; without Main the server still dies with the test binary, but its
// folder is left behind. Stop and Restart on it fail the test, since other
// tests use it too.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		shared.srv, shared.err = start(pgcluster.Options{})
		if shared.err == nil {
			shared.srv.shared = true
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	shared.srv.logOnFailure(t)
	return shared.srv
}

// MainLeakChecked is Main, and then fails the package when a test left a
// goroutine running (go.uber.org/goleak).
func MainLeakChecked(m *testing.M) int {
	code := Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// Main runs the tests and then stops the Shared server if one was started.
// It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop the shared server: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// start makes the server, then checks that it is the major EnvVersion
// asks for, so that a run meant for one version never passes on another.
func start(o pgcluster.Options) (*Server, error) {
	major, err := wantedMajor()
	if err != nil {
		return nil, err
	}
	s, err := startAny(o, major)
	if err != nil || major == 0 {
		return s, err
	}
	if err := s.checkMajor(major); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func startAny(o pgcluster.Options, major int) (*Server, error) {
	if raw := os.Getenv(EnvURL); raw != "" {
		return external(raw)
	}
	if major != 0 && o.BinDir == "" {
		dir, err := pgcluster.BinDirFor(major)
		if err != nil && !errors.Is(err, pgcluster.ErrNoBinaries) {
			return nil, fmt.Errorf("%s=%d: %w", EnvVersion, major, err)
		}
		o.BinDir = dir // "" when missing: Start then reports ErrNoBinaries
		if err != nil {
			return startDockerInstead(o, major, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := pgcluster.Start(ctx, o)
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		return startDockerInstead(o, major, err)
	}
	if err != nil {
		return nil, err
	}
	return &Server{cluster: c, dsn: c.DSN, admin: c.DSN("postgres"), close: c.Close}, nil
}

// startDockerInstead starts a postgres container where no server binaries
// were found (noBinaries says why).
func startDockerInstead(o pgcluster.Options, major int, noBinaries error) (*Server, error) {
	if o.TLS != nil {
		return nil, fmt.Errorf("%w\n(a postgres container is no substitute: pgtest cannot give it a TLS certificate)", noBinaries)
	}
	s, err := startDocker(o, major)
	if err != nil {
		return nil, fmt.Errorf("%w\n(nor could a postgres container be started: %v)", noBinaries, err)
	}
	return s, nil
}

// wantedMajor is EnvVersion's major, 0 when it is unset.
func wantedMajor() (int, error) {
	raw := os.Getenv(EnvVersion)
	if raw == "" {
		return 0, nil
	}
	major, err := strconv.Atoi(raw)
	if err != nil || major < pgcluster.OldestMajor || major > pgcluster.NewestMajor {
		return 0, fmt.Errorf("%s=%q: want a PostgreSQL major from %d to %d, such as 17",
			EnvVersion, raw, pgcluster.OldestMajor, pgcluster.NewestMajor)
	}
	return major, nil
}

// checkMajor fails unless the server's major version is major.
func (s *Server) checkMajor(major int) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var num int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&num); err != nil {
		return fmt.Errorf("read the server's version: %w", err)
	}
	if got := num / 10000; got != major {
		return fmt.Errorf("%s=%d, but the server is PostgreSQL %d (server_version_num %d)", EnvVersion, major, got, num)
	}
	return nil
}

func external(raw string) (*Server, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// The parse error would repeat the URL, password included.
		return nil, fmt.Errorf("%s: want a URL of the form postgres://user:password@host:port/database", EnvURL)
	}
	s := &Server{
		dsn: func(database string) string {
			v := *u
			v.Path, v.RawPath = "/"+database, ""
			return v.String()
		},
		admin: raw,
		fixed: "the server from " + EnvURL + " cannot be stopped or restarted by a test",
		close: func() error { return nil },
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvURL, err)
	}
	defer conn.Close(ctx)
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return nil, fmt.Errorf("%s: SHOW wal_level: %w", EnvURL, err)
	}
	if level != "logical" {
		return nil, fmt.Errorf("%s: the server has wal_level=%s; set wal_level = logical in its postgresql.conf and restart it", EnvURL, level)
	}
	return s, nil
}

func (s *Server) logOnFailure(t testing.TB) {
	if s.cluster == nil {
		return
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tail of %s:\n%s", s.cluster.LogFile(), s.cluster.LogTail(30))
		}
	})
}

// CAFile returns the PEM file of the CA that signed the server's
// certificate, or "" if the server was not started WithTLS.
func (s *Server) CAFile() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.CAFile()
}

// DSN returns a URL that connects to database as a superuser (for a server
// from EnvURL, as the user in that URL).
func (s *Server) DSN(database string) string { return s.dsn(database) }

// MigratedDatabase makes a new database with outboxd's migrations
// applied, and returns its DSN and a normal connection to it that the
// test's cleanup closes.
func (s *Server) MigratedDatabase(t testing.TB) (string, *pgx.Conn) {
	t.Helper()
	dsn := s.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return dsn, conn
}

// NewDatabase creates an empty database with a unique name and returns its
// DSN. On a shared or external server t.Cleanup drops it again, first
// ending its sessions and dropping its replication slots.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := databaseName(t.Name())
	s.Exec(t, s.admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if s.shared || s.cluster == nil {
		t.Cleanup(func() {
			if err := s.dropDatabase(name); err != nil {
				t.Errorf("drop test database %s: %v", name, err)
			}
		})
	}
	return s.DSN(name)
}

// databaseName makes a name that says which test made it, is unique even
// across test binaries sharing one server, and fits in 63 bytes.
func databaseName(test string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(test) {
		if b.Len() >= 44 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String() + "_" + strings.ToLower(rand.Text()[:10])
}

// dropDatabase retries because a walsender that was just terminated may
// still hold its slot, and a database with a slot cannot be dropped.
func (s *Server) dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for {
		_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, name)
		if err == nil {
			_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
				WHERE database = $1`, name)
		}
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Exec runs sql with args on a new connection to dsn and fails the test on
// error.
func (s *Server) Exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

// Stop shuts the server down in mode "fast", "immediate" (a crash, as far
// as PostgreSQL can tell) or "kill" (kill -9 of the postmaster). It fails
// the test on the Shared server and skips it on a server from EnvURL or
// Docker.
func (s *Server) Stop(t testing.TB, mode string) {
	t.Helper()
	s.mustControl(t)
	if err := s.cluster.Stop(mode); err != nil {
		t.Fatal(err)
	}
}

// Restart stops the server (fast) if it runs and starts it again on the
// same port and data, returning once it accepts connections. It fails the
// test on the Shared server and skips it on a server from EnvURL or Docker.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop(t, "fast")
	s.start(t)
}

// CopyData shuts the server down (fast), copies its data folder aside and
// starts it again. The returned restore shuts it down, puts that copy back
// in place of the data folder and starts it: the database is then as it
// was at the copy, with the same system identifier and timeline, as after
// a restore from a copy of a stopped server or a file system snapshot. It
// fails the test on the Shared server and skips it on a server from EnvURL
// or Docker.
func (s *Server) CopyData(t testing.TB) (restore func()) {
	t.Helper()
	s.mustControl(t)
	saved := filepath.Join(t.TempDir(), "data")
	s.Stop(t, "fast")
	copyTree(t, s.cluster.DataDir(), saved)
	s.start(t)
	return func() {
		t.Helper()
		s.Stop(t, "fast")
		if err := os.RemoveAll(s.cluster.DataDir()); err != nil {
			t.Fatal(err)
		}
		copyTree(t, saved, s.cluster.DataDir())
		s.start(t)
	}
}

// StartStandby starts a streaming physical standby of the server (see
// pgcluster.Cluster.StartStandby: the server is shut down cleanly and
// started again for the copy), which t.Cleanup stops. slot is the physical
// slot it streams from and its application_name; database is the one its
// primary_conninfo names; conf adds standby settings. It fails the test on
// the Shared server and skips it on a server from EnvURL or Docker.
func (s *Server) StartStandby(t testing.TB, slot, database string, conf map[string]string) *Server {
	t.Helper()
	s.mustControl(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := s.cluster.StartStandby(ctx, pgcluster.StandbyOptions{Slot: slot, Database: database, ExtraConf: conf})
	if err != nil {
		t.Fatal(err)
	}
	sb := &Server{cluster: c, dsn: c.DSN, admin: c.DSN("postgres"), close: c.Close}
	t.Cleanup(func() {
		if err := sb.close(); err != nil {
			t.Errorf("stop the standby: %v", err)
		}
	})
	sb.logOnFailure(t)
	return sb
}

// Promote makes a standby the primary and returns once it accepts writes.
func (s *Server) Promote(t testing.TB) {
	t.Helper()
	s.mustControl(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.cluster.Promote(ctx); err != nil {
		t.Fatal(err)
	}
}

// Port is the server's TCP port on 127.0.0.1; 0 for a server from EnvURL
// or Docker.
func (s *Server) Port() int {
	if s.cluster == nil {
		return 0
	}
	return s.cluster.Port()
}

// copyTree copies a folder with its owners and modes (cp -a): PGDATA
// belongs to the server's user and must keep mode 0700.
func copyTree(t testing.TB, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("copy %s to %s: %v: %s", from, to, err, out)
	}
}

// start starts the stopped server, failing the test if it does not come up.
func (s *Server) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) mustControl(t testing.TB) {
	t.Helper()
	if s.shared {
		t.Fatal("pgtest: the Shared server cannot be stopped: other tests use it; use pgtest.Start")
	}
	if s.cluster == nil {
		t.Skip(s.fixed)
	}
}
