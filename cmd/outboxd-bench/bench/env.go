package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// target is a NATS server the benchmark publishes to.
type target struct {
	url string
	pid int // 0 if not on this machine or not known
	nc  *nats.Conn
	js  jetstream.JetStream
}

func connectTarget(url string, pid int) (*target, error) {
	nc, err := nats.Connect(url, nats.Name("outboxd-bench"))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &target{url: url, pid: pid, nc: nc, js: js}, nil
}

// env is the servers and connections one benchmark uses.
type env struct {
	cfg        Config
	conn       *pgx.Conn // the driver's: setup, slots, statistics
	pgURL      string
	relayURL   string // what the relays connect with (role bench_relay)
	postmaster int
	main       *target // default nats-server
	durable    *target // sync_interval: always
	pad        string
	closers    []func() error
}

// setUp starts (or connects to) the servers and prepares the schema.
func setUp(ctx context.Context, cfg Config) (_ *env, err error) {
	e := &env{cfg: cfg, pad: payloadPad(cfg.PayloadBytes)}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
		}
	}()
	e.pgURL = cfg.PGURL
	if e.pgURL == "" {
		e.progressf("starting PostgreSQL (private cluster, wal_level=logical)")
		pg, err := startPostgres(ctx, cfg.WorkDir)
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, pg.Close)
		e.pgURL = pg.DSN("postgres")
	}
	if e.conn, err = pgx.Connect(ctx, e.pgURL); err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	e.closers = append(e.closers, func() error { return e.conn.Close(context.Background()) })
	e.postmaster = postmasterPID(ctx, e.conn)
	if err := prepareSchema(ctx, e.conn); err != nil {
		return nil, err
	}
	e.relayURL = e.pgURL
	if cfg.PGURL == "" {
		e.relayURL = withUser(e.pgURL, relayRole) // trust authentication on the private cluster
	}
	if e.main, err = e.natsTarget(ctx, cfg.NATSURL, "nats", false); err != nil {
		return nil, err
	}
	if e.durable, err = e.natsTarget(ctx, cfg.DurableNATSURL, "nats-durable", true); err != nil {
		return nil, err
	}
	return e, nil
}

// natsTarget connects to url, or starts a nats-server when url is empty.
func (e *env) natsTarget(ctx context.Context, url, dir string, syncAlways bool) (*target, error) {
	pid := 0
	if url == "" {
		e.progressf("starting nats-server in %s (sync_interval always: %t)", dir, syncAlways)
		s, err := startNATS(ctx, e.cfg.NATSServer, filepath.Join(e.cfg.WorkDir, dir), syncAlways)
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, func() error { return s.stop(30 * time.Second) })
		url, pid = s.url, s.pid()
	}
	t, err := connectTarget(url, pid)
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, func() error { t.nc.Close(); return nil })
	return t, nil
}

// close stops what setUp started, in reverse order.
func (e *env) close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}

func (e *env) progressf(format string, args ...any) {
	fmt.Fprintf(e.cfg.Progress, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func withUser(dsn, user string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.User = url.User(user)
	return u.String()
}

// BuildPrograms builds outboxd and nats-server into dir where cfg does not
// name them, and finds pg_recvlogical and the nats CLI, installing the CLI
// (natscli v0.5.0) with `go install` if it is missing. moduleDir is the
// outboxd module's folder.
func BuildPrograms(ctx context.Context, cfg *Config, moduleDir, dir string) error {
	build := func(out *string, name, pkg string) error {
		if *out != "" {
			return nil
		}
		*out = filepath.Join(dir, name)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", *out, pkg)
		cmd.Dir = moduleDir
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
		return nil
	}
	if err := build(&cfg.Outboxd, "outboxd", "./cmd/outboxd"); err != nil {
		return err
	}
	// The server's own main package, at the version go.mod requires.
	if err := build(&cfg.NATSServer, "nats-server", "github.com/nats-io/nats-server/v2"); err != nil {
		return err
	}
	var err error
	if cfg.PGRecvlogical == "" {
		if cfg.PGRecvlogical, err = findPGRecvlogical(); err != nil {
			return err
		}
	}
	if cfg.NATSCLI == "" {
		if cfg.NATSCLI, err = findNATSCLI(ctx, moduleDir); err != nil {
			return err
		}
	}
	return nil
}

func findPGRecvlogical() (string, error) {
	if p, err := exec.LookPath("pg_recvlogical"); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_recvlogical")
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", errors.New("pg_recvlogical not found on PATH or in /usr/lib/postgresql/*/bin: " +
		"install the PostgreSQL client (bash scripts/ensure-postgres), or pass --pg-recvlogical")
}

// natscliVersion is the nats CLI the broker limit is measured with; its
// `bench js pub` syntax is the one used here.
const natscliVersion = "github.com/nats-io/natscli/nats@v0.5.0"

func findNATSCLI(ctx context.Context, moduleDir string) (string, error) {
	gobin, err := goBin(ctx)
	if err != nil {
		return "", err
	}
	local := filepath.Join(gobin, "nats")
	if _, err := os.Stat(local); err == nil {
		return local, nil
	}
	if p, err := exec.LookPath("nats"); err == nil {
		return p, nil
	}
	cmd := exec.CommandContext(ctx, "go", "install", natscliVersion)
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("the nats CLI is missing and go install %s failed: %w\n%s", natscliVersion, err, b)
	}
	return local, nil
}

// goBin is where go install puts programs.
func goBin(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) > 0 && lines[0] != "" {
		return lines[0], nil
	}
	if len(lines) > 1 && lines[1] != "" {
		return filepath.Join(filepath.SplitList(lines[1])[0], "bin"), nil
	}
	return "", fmt.Errorf("go env printed %q: no GOBIN or GOPATH", out)
}
