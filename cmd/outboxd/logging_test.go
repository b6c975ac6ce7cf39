package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// TestLevelSharedByDerivedLoggers: a logger derived with With() (as every
// component's is) follows a change of the shared level.
func TestLevelSharedByDerivedLoggers(t *testing.T) {
	var out testsync.Buffer
	log, level := newLoggerTo(&out, "warn")
	sink := log.With().Str("component", "sink").Logger()
	sink.Info().Msg("hidden at warn")
	level.set(zerolog.DebugLevel)
	sink.Debug().Msg("shown at debug")
	level.set(zerolog.ErrorLevel)
	sink.Warn().Msg("hidden at error")
	got := out.String()
	if strings.Contains(got, "hidden") || !strings.Contains(got, "shown at debug") {
		t.Errorf("log output:\n%s", got)
	}
}

// TestHangupReloadsLogLevel sends the test process a real SIGHUP: the
// level changes to what reload gives, a bad value or a failing reload
// leaves it, and after stop SIGHUP is no longer caught by it.
func TestHangupReloadsLogLevel(t *testing.T) {
	var out testsync.Buffer
	log, level := newLoggerTo(&out, "info")
	var mu sync.Mutex
	next, nextErr := "debug", error(nil)
	reloads := make(chan struct{}, 10)
	stop := reloadOnHangup(log, level, func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		defer func() { reloads <- struct{}{} }()
		return next, nextErr
	})
	defer stop()
	// hangup sends SIGHUP with the next reload returning value and err,
	// and waits until the reload is done: its log line written and the
	// level it leaves (want) set. The reload callback returns before
	// either, so waiting for the callback alone races with them.
	hangups := 0
	hangup := func(value string, err error, want zerolog.Level) {
		t.Helper()
		mu.Lock()
		next, nextErr = value, err
		mu.Unlock()
		hangups++
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reloads:
		case <-time.After(10 * time.Second):
			t.Fatal("SIGHUP did not reload")
		}
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(out.String(), "SIGHUP:") < hangups || level.get() != want {
			if time.Now().After(deadline) {
				t.Fatalf("after SIGHUP %d (%q, %v): level %s, want %s; log:\n%s", hangups, value, err, level.get(), want, out.String())
			}
			time.Sleep(time.Millisecond)
		}
	}

	log.Debug().Msg("debug before")
	hangup("debug", nil, zerolog.DebugLevel)
	log.Debug().Msg("debug after")
	hangup("loud", nil, zerolog.DebugLevel)
	hangup("", errors.New("config file: permission denied"), zerolog.DebugLevel)
	hangup("error", nil, zerolog.ErrorLevel)
	log.Warn().Msg("warn at error level")

	got := out.String()
	for _, want := range []string{"debug after", `"from":"info","to":"debug"`, `"value":"loud"`, "permission denied", `"from":"debug","to":"error"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"debug before", "warn at error level"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("log has %q:\n%s", unwanted, got)
		}
	}
}

// TestExitLog: the error a command ends with is logged through the
// command's logger as a JSON line at error level, whatever the level
// (error is the highest outboxd takes); before the command made a logger
// there is none, and main prints plain text.
func TestExitLog(t *testing.T) {
	ctx, exit := withExitLog(context.Background())
	cause := errors.New(`stream "OUTBOX" does not exist: create it, or pass --create-stream`)
	if exit.logError(cause) {
		t.Fatal("logError() = true before a logger was made")
	}
	if got, ok := ctx.Value(exitLogKey{}).(*exitLog); !ok || got != exit {
		t.Fatal("the context does not carry the exitLog")
	}
	var out testsync.Buffer
	log, _ := newLoggerTo(&out, "error")
	exit.set(log)
	if !exit.logError(cause) {
		t.Fatal("logError() = false with a logger")
	}
	var line struct {
		Level   string `json:"level"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(out.String()), &line); err != nil {
		t.Fatalf("not one JSON line: %v\n%s", err, out.String())
	}
	if line.Level != "error" || line.Error != cause.Error() || line.Message != "exiting with status 1" {
		t.Errorf("logged %+v, want level error, the error and the exit status", line)
	}
}
