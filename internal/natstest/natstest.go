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
type Option func(*natsembed.Config)

// WithSyncAlways makes JetStream fsync every write (sync_interval: always).
func WithSyncAlways() Option { return func(c *natsembed.Config) { c.SyncAlways = true } }

// WithMaxPayload sets the largest message the server accepts, in bytes.
func WithMaxPayload(n int32) Option { return func(c *natsembed.Config) { c.MaxPayload = n } }

// Server is an in-process NATS server with JetStream. Its methods are safe
// for concurrent use.
type Server struct {
	cfg natsembed.Config // Port is fixed after the first start

	mu  sync.Mutex
	srv *server.Server // nil while shut down
}

// Start starts a server on a free loopback port with its store under
// t.TempDir(), without logging. t.Cleanup shuts it down.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{cfg: natsembed.Config{StoreDir: t.TempDir()}}
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
	srv, err := natsembed.Start(ctx, s.cfg)
	if err != nil {
		return err
	}
	s.srv = srv
	return nil
}

// Conn connects to the server; t.Cleanup closes the connection. It
// reconnects every 50ms without limit, so it outlives a Shutdown/Restart;
// opts come after those defaults and can override them.
func (s *Server) Conn(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return connect(t, s.URL(), opts)
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
