package natsembed

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

// readyTimeout bounds Start even when ctx has no deadline.
const readyTimeout = 10 * time.Second

// Config describes an embedded server.
type Config struct {
	// StoreDir is JetStream's storage folder. Required.
	StoreDir string
	// Host is the client listen address. Default: "127.0.0.1".
	Host string
	// Port is the client port. Default: a random free port; read the one
	// chosen from the server's Addr().
	Port int
	// SyncAlways makes JetStream fsync every write (sync_interval: always)
	// instead of every two minutes.
	SyncAlways bool
	// MaxPayload is the largest message the server accepts, in bytes.
	// Default: the server's default, 1 MiB.
	MaxPayload int32
	// ServerName names the server in logs, monitoring and JetStream's
	// cluster metadata. Default: the server's generated ID, which changes on
	// every start. Required with Cluster.Name: JetStream derives a node's
	// peer ID from its name, so a node must keep it across restarts.
	ServerName string
	// Cluster makes the server a node of a JetStream cluster. Default: the
	// zero ClusterConfig, a standalone server with no route port.
	Cluster ClusterConfig
	// Logger receives the server's log. Default: the zero Logger, which
	// discards everything.
	Logger zerolog.Logger
}

// ClusterConfig describes a server's place in a cluster. Its zero value
// means not clustered.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every node. Empty: the server
	// is not clustered, and Port and Routes must be unset.
	Name string
	// Port is the route port the other nodes connect to, on Config.Host.
	// Default: a random free port; read the one chosen from the server's
	// ClusterAddr(). Peers can only be told a port known in advance.
	Port int
	// Routes are the route URLs ("nats-route://127.0.0.1:6222") of the
	// cluster's nodes. Required with Name. List every node, this one
	// included (the server ignores a route to itself): before JetStream has
	// seen its peers it sizes its metadata group from this list, and a list
	// shorter than the cluster sets too small a quorum.
	Routes []string
}

// Options returns the server options for cfg.
func (cfg Config) Options() (*server.Options, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("natsembed: StoreDir is required")
	}
	o := &server.Options{
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		SyncAlways: cfg.SyncAlways,
		MaxPayload: cfg.MaxPayload,
		NoSigs:     true, // the caller owns the process's signals
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = server.RANDOM_PORT
	}
	o.ServerName = cfg.ServerName
	if err := cfg.Cluster.apply(o); err != nil {
		return nil, err
	}
	return o, nil
}

// apply sets o's cluster options; o.Host must already be set.
func (c ClusterConfig) apply(o *server.Options) error {
	if c.Name == "" {
		if c.Port != 0 || len(c.Routes) != 0 {
			return errors.New("natsembed: Cluster.Port and Cluster.Routes need Cluster.Name")
		}
		return nil
	}
	if o.ServerName == "" {
		return errors.New("natsembed: ServerName is required with Cluster.Name")
	}
	if len(c.Routes) == 0 {
		return errors.New("natsembed: Cluster.Routes is required with Cluster.Name (list every node, this one included)")
	}
	routes := make([]*url.URL, 0, len(c.Routes))
	for _, r := range c.Routes {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "nats-route" || u.Host == "" {
			return fmt.Errorf("natsembed: Cluster.Routes: %q is not a nats-route://host:port URL", r)
		}
		routes = append(routes, u)
	}
	o.Cluster = server.ClusterOpts{Name: c.Name, Host: o.Host, Port: c.Port}
	if o.Cluster.Port == 0 {
		o.Cluster.Port = server.RANDOM_PORT
	}
	o.Routes = routes
	return nil
}

// Start starts a server and returns once it accepts clients. The caller
// stops it with Shutdown and WaitForShutdown.
func Start(ctx context.Context, cfg Config) (*server.Server, error) {
	opts, err := cfg.Options()
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	l := cfg.Logger.With().Str("component", "nats-server").Logger()
	s.SetLoggerV2(logger{l}, l.GetLevel() <= zerolog.DebugLevel, false, false)
	s.Start()

	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for !s.ReadyForConnections(100 * time.Millisecond) {
		if ctx.Err() != nil {
			s.Shutdown()
			s.WaitForShutdown()
			return nil, fmt.Errorf("nats server on %s:%d not ready: %w", opts.Host, opts.Port, ctx.Err())
		}
	}
	return s, nil
}

// logger adapts zerolog to server.Logger. Fatalf logs at error level: the
// server must not end the caller's process.
type logger struct{ l zerolog.Logger }

func (z logger) Noticef(format string, v ...any) { z.l.Info().Msgf(format, v...) }
func (z logger) Warnf(format string, v ...any)   { z.l.Warn().Msgf(format, v...) }
func (z logger) Fatalf(format string, v ...any)  { z.l.Error().Msgf(format, v...) }
func (z logger) Errorf(format string, v ...any)  { z.l.Error().Msgf(format, v...) }
func (z logger) Debugf(format string, v ...any)  { z.l.Debug().Msgf(format, v...) }
func (z logger) Tracef(format string, v ...any)  { z.l.Trace().Msgf(format, v...) }
