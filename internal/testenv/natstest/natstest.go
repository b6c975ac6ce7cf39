package natstest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/natsembed"
)

// Option changes how Start configures the server.
type Option func(*settings)

// settings is what the options set: the embedded server's Config, changes
// to the server options natsembed does not cover (TLS, users), and the
// client options Conn needs to get in.
type settings struct {
	natsembed.Config
	tune   []func(*server.Options)
	client []nats.Option
}

// WithSyncAlways makes JetStream fsync every write (sync_interval: always).
func WithSyncAlways() Option { return func(c *settings) { c.SyncAlways = true } }

// WithMaxPayload sets the largest message the server accepts, in bytes.
func WithMaxPayload(n int32) Option { return func(c *settings) { c.MaxPayload = n } }

// WithMonitoring opens the HTTP monitoring port (/jsz, /varz) on a free
// loopback port; MonitorURL returns it.
func WithMonitoring() Option {
	return func(c *settings) {
		c.tune = append(c.tune, func(o *server.Options) { o.HTTPHost, o.HTTPPort = "127.0.0.1", -1 })
	}
}

// Server is an in-process NATS server with JetStream. Its methods are safe
// for concurrent use.
type Server struct {
	cfg settings // Port is fixed after the first start

	mu  sync.Mutex
	srv *server.Server // nil while shut down
}

// Start starts a server on a free loopback port with its store under
// t.TempDir(), without logging. t.Cleanup shuts it down.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{cfg: settings{Config: natsembed.Config{StoreDir: t.TempDir()}}}
	for _, o := range opts {
		o(&s.cfg)
	}
	s.Restart(t)
	s.cfg.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.Shutdown)
	return s
}

// URL returns the client URL; it stays the same across Restart.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.cfg.Port) }

// MonitorURL returns the HTTP monitoring URL of a server started
// WithMonitoring ("" otherwise, or while it is shut down). Its port
// changes on Restart.
func (s *Server) MonitorURL() string {
	srv := s.Server()
	if srv == nil || srv.MonitorAddr() == nil {
		return ""
	}
	return "http://" + srv.MonitorAddr().String()
}

// Name returns the server's configured name: n1…nN for the nodes of a
// Cluster, empty for a server from Start (nats-server then names it by its
// ID, which changes on Restart).
func (s *Server) Name() string { return s.cfg.ServerName }

// StoreDir returns JetStream's storage folder.
func (s *Server) StoreDir() string { return s.cfg.StoreDir }

// Server returns the running server, or nil while it is shut down.
func (s *Server) Server() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Shutdown stops the server and waits until it has stopped. The store and
// the port are kept for Restart. Shutting down a stopped server does nothing.
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart shuts the server down if it runs and starts a new one on the same
// port and store, so streams and their messages survive. A cluster node
// rejoins its cluster; Cluster.WaitReady waits until it has caught up.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.restart(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) restart() error {
	s.Shutdown()
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := start(ctx, s.cfg)
	if err != nil {
		return err
	}
	s.srv = srv
	return nil
}

// start is natsembed.Start with cfg.tune applied to the server options.
func start(ctx context.Context, cfg settings) (*server.Server, error) {
	if len(cfg.tune) == 0 {
		return natsembed.Start(ctx, cfg.Config)
	}
	opts, err := cfg.Options()
	if err != nil {
		return nil, err
	}
	for _, tune := range cfg.tune {
		tune(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	for !srv.ReadyForConnections(100 * time.Millisecond) {
		if ctx.Err() != nil {
			srv.Shutdown()
			srv.WaitForShutdown()
			return nil, fmt.Errorf("nats server on %s:%d not ready: %w", opts.Host, opts.Port, ctx.Err())
		}
	}
	return srv, nil
}

// Conn connects to the server; t.Cleanup closes the connection. It
// reconnects every 50ms without limit, so it outlives a Shutdown/Restart;
// it trusts the CA of WithTLS and logs in as the admin of WithUsers,
// WithToken or WithNkeyUsers; opts come after those defaults and can
// override them.
func (s *Server) Conn(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return connect(t, s.URL(), append(append([]nats.Option(nil), s.cfg.client...), opts...))
}

// JetStream returns a JetStream context on a new Conn(t).
func (s *Server) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	return newJetStream(t, s.Conn(t))
}

// connect is Conn for one URL or a comma-separated list of them.
func connect(t testing.TB, url string, opts []nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.Name(t.Name()), nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func newJetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
