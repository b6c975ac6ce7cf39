package natsembed

import (
	"context"
	"errors"
	"fmt"
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
	// Logger receives the server's log. Default: the zero Logger, which
	// discards everything.
	Logger zerolog.Logger
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
	return o, nil
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
