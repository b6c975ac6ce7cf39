package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/outboxd/outboxd/internal/natsembed"
	"github.com/outboxd/outboxd/internal/testenv/pgcluster"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(crashChild()) // a consumer process for TestCrashExactlyOnce
	}
	os.Exit(runTests(m))
}

// runTests runs the tests and the examples, then checks for leaked
// goroutines. The examples are written as an application would write
// them, with DATABASE_URL and NATS_URL: this points them at a database of
// the PostgreSQL server the tests share and at an in-process nats-server.
func runTests(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	stop, err := exampleServers(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "inbox tests: servers for the examples:", err)
		return 1
	}
	code := pgtest.Main(m)
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "inbox tests: stop the examples' servers:", err)
		code = max(code, 1)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// exampleServers sets DATABASE_URL and NATS_URL for the examples and
// returns what stops their servers. PostgreSQL is the server of
// OUTBOXD_TEST_PG_URL or else a cluster started here, which it then names
// in OUTBOXD_TEST_PG_URL so that pgtest.Shared uses it too, instead of
// starting a second one.
func exampleServers(ctx context.Context) (stop func() error, err error) {
	admin, stopPG, err := postgresForExamples(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "inbox-example-nats-")
	if err != nil {
		return nil, errors.Join(err, stopPG())
	}
	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: dir})
	if err != nil {
		return nil, errors.Join(err, stopPG(), os.RemoveAll(dir))
	}
	stop = func() error {
		srv.Shutdown()
		srv.WaitForShutdown()
		return errors.Join(dropExampleDatabase(admin), stopPG(), os.RemoveAll(dir))
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+exampleDatabase); err != nil {
		return nil, errors.Join(err, stop())
	}
	dsn, err := replaceDatabase(admin, exampleDatabase)
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	os.Setenv("DATABASE_URL", dsn)
	os.Setenv("NATS_URL", srv.ClientURL())
	return stop, nil
}

// exampleDatabase is unique per process: test binaries of several
// packages may share the server of OUTBOXD_TEST_PG_URL.
var exampleDatabase = "inbox_example_" + strconv.Itoa(os.Getpid())

func postgresForExamples(ctx context.Context) (admin string, stop func() error, err error) {
	if raw := os.Getenv(pgtest.EnvURL); raw != "" {
		return raw, func() error { return nil }, nil
	}
	var opts pgcluster.Options
	if v := os.Getenv(pgtest.EnvVersion); v != "" {
		major, err := strconv.Atoi(v)
		if err != nil {
			return "", nil, fmt.Errorf("%s=%q: want a PostgreSQL major such as 17", pgtest.EnvVersion, v)
		}
		if opts.BinDir, err = pgcluster.BinDirFor(major); err != nil {
			return "", nil, err
		}
	}
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		return "", nil, fmt.Errorf("%w (install the server binaries with scripts/ensure-postgres, or name a server in %s)", err, pgtest.EnvURL)
	}
	os.Setenv(pgtest.EnvURL, c.DSN("postgres"))
	return c.DSN("postgres"), c.Close, nil
}

func dropExampleDatabase(admin string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+exampleDatabase+" WITH (FORCE)")
	return err
}

// replaceDatabase returns the URL dsn with its database replaced.
func replaceDatabase(dsn, database string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		// The parse error would repeat the URL, password included.
		return "", fmt.Errorf("%s: want a URL of the form postgres://user:password@host:port/database", pgtest.EnvURL)
	}
	u.Path, u.RawPath = "/"+database, ""
	return u.String(), nil
}
