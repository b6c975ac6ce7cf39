package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// logLevel is the level the whole process logs at. Every logger derived
// from newLogger's shares it, so SIGHUP can change it while outboxd runs.
type logLevel struct{ v atomic.Int32 }

func (l *logLevel) get() zerolog.Level  { return zerolog.Level(l.v.Load()) }
func (l *logLevel) set(v zerolog.Level) { l.v.Store(int32(v)) }

// levelWriter drops the events below the shared level. zerolog checks a
// logger's own level before building an event and this one's after, so the
// loggers are made at debug level and events below the shared level cost
// their formatting: outboxd logs nothing per event at debug level except
// what --log-payloads asks for.
type levelWriter struct {
	out   io.Writer
	level *logLevel
}

func (w levelWriter) Write(p []byte) (int, error) { return w.out.Write(p) }

func (w levelWriter) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	if l < w.level.get() {
		return len(p), nil
	}
	return w.out.Write(p)
}

// exitLog holds the logger of the command that runs, so that main logs
// the error the command ends with as one more line in the same format (a
// JSON line when the logs are JSON). A command that fails before it makes
// a logger (a flag or setting that does not parse) leaves it empty, and
// main prints plain text.
type exitLog struct {
	mu  sync.Mutex
	log *zerolog.Logger
}

type exitLogKey struct{}

// withExitLog returns ctx carrying a new, empty exitLog.
func withExitLog(ctx context.Context) (context.Context, *exitLog) {
	e := &exitLog{}
	return context.WithValue(ctx, exitLogKey{}, e), e
}

// logError logs err at error level through the command's logger and
// reports whether there was one.
func (e *exitLog) logError(err error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.log == nil {
		return false
	}
	e.log.Error().Err(err).Msg("exiting with status 1")
	return true
}

// set makes log the logger logError logs through.
func (e *exitLog) set(log zerolog.Logger) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = &log
}

// newCommandLogger is newLogger for the command run with ctx: main logs
// the error the command ends with through it.
func newCommandLogger(ctx context.Context, level string) (zerolog.Logger, *logLevel) {
	log, shared := newLogger(level)
	if e, ok := ctx.Value(exitLogKey{}).(*exitLog); ok {
		e.set(log)
	}
	return log, shared
}

// newLogger logs JSON to stderr, or a console format when stderr is a
// terminal, at level; the returned logLevel changes it for every logger
// derived from this one.
func newLogger(level string) (zerolog.Logger, *logLevel) {
	var out io.Writer = os.Stderr
	if isatty.IsTerminal(os.Stderr.Fd()) {
		out = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly}
	}
	return newLoggerTo(out, level)
}

func newLoggerTo(out io.Writer, level string) (zerolog.Logger, *logLevel) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	shared := &logLevel{}
	shared.set(lvl)
	log := zerolog.New(levelWriter{out: out, level: shared}).Level(zerolog.DebugLevel)
	return log.With().Timestamp().Logger(), shared
}

// reloadOnHangup sets the log level from reload every time the process gets
// SIGHUP, until the returned stop is called (which waits for it). A level
// that reload cannot give is logged and the level stays as it was.
func reloadOnHangup(log zerolog.Logger, level *logLevel, reload func() (string, error)) (stop func()) {
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-hangups:
				reloadLevel(log, level, reload)
			}
		}
	}()
	return func() {
		signal.Stop(hangups)
		close(done)
		wg.Wait()
	}
}

func reloadLevel(log zerolog.Logger, level *logLevel, reload func() (string, error)) {
	text, err := reload()
	if err != nil {
		log.Error().Err(err).Str("log_level", level.get().String()).Msg("SIGHUP: cannot reload the log level; it stays")
		return
	}
	lvl, err := zerolog.ParseLevel(text)
	if err != nil || text == "" {
		log.Error().Str("value", text).Str("log_level", level.get().String()).
			Msg("SIGHUP: the log level read is not one of debug, info, warn, error; it stays")
		return
	}
	// At warn and before the change, so the line shows whatever the
	// levels before and after.
	log.Warn().Str("from", level.get().String()).Str("to", lvl.String()).Msg("SIGHUP: log level reloaded")
	level.set(lvl)
}
