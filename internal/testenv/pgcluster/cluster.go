package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
)

const (
	startTimeout = time.Minute // bounds Start even when ctx has no deadline
	stopTimeout  = time.Minute // after this Stop kills the server
	// maxSocketPath is sun_path's size on Linux, including the NUL.
	maxSocketPath = 108
)

// Options configures Start. The zero value means all defaults.
type Options struct {
	// Dir is the cluster's folder: it will hold data/ (PGDATA, made by
	// initdb, so it must not exist yet), postgres.log and the Unix socket.
	// Default: a new temporary folder, removed by Close.
	Dir string
	// Port is the TCP port on 127.0.0.1. Default: a free port.
	Port int
	// BinDir holds initdb and postgres. Default: the folder of initdb on
	// PATH, else the newest /usr/lib/postgresql/*/bin.
	BinDir string
	// ExtraConf adds or overrides postgresql.conf settings; values are
	// quoted by pgcluster. port, listen_addresses and
	// unix_socket_directories cannot be overridden.
	ExtraConf map[string]string
	// TLS, when set, turns on ssl with a server certificate signed by a CA
	// made for this cluster (see CAFile). ssl, ssl_cert_file and
	// ssl_key_file cannot then be overridden. Default: no TLS.
	TLS *TLSOptions
	// Logger receives start and stop events. Default: zerolog.Nop().
	Logger zerolog.Logger
}

// Cluster is a running (or stopped) private PostgreSQL cluster. Its methods
// are safe for concurrent use.
type Cluster struct {
	dir     string
	ownsDir bool
	port    int
	binDir  string
	user    *serverUser
	log     zerolog.Logger
	caFile  string // "" without TLS

	mu   sync.Mutex
	cmd  *exec.Cmd     // nil while stopped
	done chan struct{} // closed when cmd has exited
}

// Start creates a cluster with initdb and starts it, returning once it
// accepts connections. The superuser is "postgres" with trust
// authentication on 127.0.0.1 only. On error nothing is left running, and a
// folder that Start created is removed.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	binDir, err := findBinDir(opts.BinDir, debianBinGlob)
	if err != nil {
		return nil, err
	}
	u, err := lookupServerUser()
	if err != nil {
		return nil, err
	}
	c := &Cluster{binDir: binDir, user: u, port: opts.Port,
		log: opts.Logger.With().Str("component", "pgcluster").Logger()}

	if opts.Dir == "" {
		if c.dir, err = os.MkdirTemp("", "pgcluster-"); err != nil {
			return nil, err
		}
		c.ownsDir = true
	} else {
		if c.dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil && c.ownsDir {
			os.RemoveAll(c.dir)
		}
	}()
	if err := u.own(c.dir); err != nil {
		return nil, fmt.Errorf("prepare %s: %w", c.dir, err)
	}
	if c.port == 0 {
		if c.port, err = freePort(); err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
	}
	if err := c.initdb(ctx); err != nil {
		return nil, err
	}
	conf := opts.ExtraConf
	if opts.TLS != nil {
		tlsConf, err := c.setUpTLS(opts.TLS)
		if err != nil {
			return nil, fmt.Errorf("set up TLS: %w", err)
		}
		conf = make(map[string]string, len(opts.ExtraConf)+len(tlsConf))
		for k, v := range opts.ExtraConf {
			conf[k] = v
		}
		for k, v := range tlsConf {
			conf[k] = v
		}
	}
	if err := c.writeConf(conf); err != nil {
		return nil, fmt.Errorf("write postgresql.conf: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

// DataDir returns the cluster's PGDATA folder.
func (c *Cluster) DataDir() string { return c.dataDir() }

func (c *Cluster) initdb(ctx context.Context) error {
	// --locale=C: the caller's LANG may name a locale that is not installed.
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "initdb"), "-D", c.dataDir(),
		"-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C")
	cmd.Dir = c.dir // initdb fails if it cannot read its working folder (root's, say)
	cmd.SysProcAttr = c.user.procAttr(syscall.SIGKILL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", c.dataDir(), err, out)
	}
	return nil
}

func (c *Cluster) writeConf(extra map[string]string) error {
	conf := map[string]string{
		"wal_level":             "logical",
		"max_replication_slots": "20",
		"max_wal_senders":       "20",
		"fsync":                 "off", // a throwaway cluster need not survive an OS crash
		"full_page_writes":      "off",
		"wal_sender_timeout":    "60s",
	}
	for k, v := range extra {
		conf[k] = v
	}
	conf["listen_addresses"] = "127.0.0.1"
	conf["port"] = strconv.Itoa(c.port)
	conf["unix_socket_directories"] = c.dir
	if len(c.dir)+len("/.s.PGSQL.65535") >= maxSocketPath {
		conf["unix_socket_directories"] = "" // too long for a socket path: TCP only
	}
	keys := make([]string, 0, len(conf))
	for k := range conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("\n# Added by outboxd's pgcluster.\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = '%s'\n", k, strings.ReplaceAll(conf[k], "'", "''"))
	}
	f, err := os.OpenFile(filepath.Join(c.dataDir(), "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(b.String())
	return errors.Join(err, f.Close())
}

// Start starts a stopped cluster again on the same folder and port, and
// returns once it accepts connections. After Stop("immediate") the server
// first replays its WAL, as after a crash.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return errors.New("start postgres: already running")
	}
	logf, err := os.OpenFile(c.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(filepath.Join(c.binDir, "postgres"), "-D", c.dataDir())
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// SIGQUIT is an immediate shutdown: the postmaster takes its backends
	// down with it. (The kernel sends it when the thread that forked exits;
	// Go only ends threads that a goroutine locked, which we do not.)
	cmd.SysProcAttr = c.user.procAttr(syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() // ends when the server exits; Stop waits for it
	c.cmd, c.done = cmd, done

	if err := c.waitReady(ctx); err != nil {
		c.stopLocked(syscall.SIGQUIT)
		return fmt.Errorf("start postgres on port %d: %w; tail of %s:\n%s",
			c.port, err, c.LogFile(), c.LogTail(20))
	}
	c.log.Info().Int("port", c.port).Str("dir", c.dir).Int("pid", cmd.Process.Pid).Msg("postgres started")
	return nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		conn, err := pgconn.Connect(attempt, c.DSN("postgres"))
		cancelAttempt()
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited: %v", c.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("not accepting connections: %w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var stopSignals = map[string]syscall.Signal{
	"fast":      syscall.SIGINT,  // roll back open transactions, checkpoint, exit
	"immediate": syscall.SIGQUIT, // exit now; the next start recovers from WAL
	// kill -9 of the postmaster, as a machine or process failure: no
	// shutdown at all. Its backends notice and exit on their own.
	"kill": syscall.SIGKILL,
}

// Stop shuts the server down in mode "fast" or "immediate", the modes of
// pg_ctl stop -m, or "kill" (SIGKILL to the postmaster, a crash), and
// waits until the postmaster has exited. Stopping a stopped cluster
// does nothing. It returns an error if the server had exited on its own.
func (c *Cluster) Stop(mode string) error {
	sig, ok := stopSignals[mode]
	if !ok {
		return fmt.Errorf("stop postgres: mode %q: want \"fast\", \"immediate\" or \"kill\"", mode)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked(sig)
}

func (c *Cluster) stopLocked(sig syscall.Signal) error {
	if c.cmd == nil {
		return nil
	}
	cmd, done := c.cmd, c.done
	c.cmd, c.done = nil, nil
	select {
	case <-done:
		return fmt.Errorf("stop postgres: it had already exited: %v", cmd.ProcessState)
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	select {
	case <-done:
		c.log.Info().Int("port", c.port).Str("signal", sig.String()).Msg("postgres stopped")
		return nil
	case <-time.After(stopTimeout):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("stop postgres: still running %s after %s; killed it", sig, stopTimeout)
	}
}

// Close stops the server (immediate mode) and removes the cluster's folder
// if Start created it.
func (c *Cluster) Close() error {
	err := c.Stop("immediate")
	if c.ownsDir {
		err = errors.Join(err, os.RemoveAll(c.dir))
	}
	return err
}

// DSN returns a URL that connects to database as the superuser "postgres".
// On a cluster started with TLS it has sslmode=require: encrypted, but the
// certificate is not verified (add sslmode=verify-full and sslrootcert=CAFile
// for that).
func (c *Cluster) DSN(database string) string {
	mode := "disable"
	if c.caFile != "" {
		mode = "require"
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=%s", c.port, url.PathEscape(database), mode)
}

// Port returns the server's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir returns the cluster's folder, which holds data/ (PGDATA), the log and
// the Unix socket.
func (c *Cluster) Dir() string { return c.dir }

// LogFile returns the path of the server's log; every start appends to it.
func (c *Cluster) LogFile() string { return filepath.Join(c.dir, "postgres.log") }

// LogTail returns the last n lines of the server's log, or a note saying why
// it cannot be read.
func (c *Cluster) LogTail(n int) string {
	b, err := os.ReadFile(c.LogFile())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePort asks the kernel for a free port. Another process may take it
// before postgres binds it; Start then fails with the log saying so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
