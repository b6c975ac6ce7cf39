package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamInfo is what `outboxd status` shows of the stream.
type StreamInfo struct {
	Name     string
	Subjects []string
	Messages uint64
	Bytes    uint64
	Replicas int
	// Storage is "file" or "memory".
	Storage         string
	DuplicateWindow time.Duration
	// Warnings name the settings that can lose or repeat events, and
	// subjects that do not cover the template, as outboxd run reports them.
	Warnings []string
}

// InspectStream reads the stream and checks its settings against the
// subject template the way EnsureStream does, creating nothing. A missing
// stream is a *StreamError matching jetstream.ErrStreamNotFound that says
// how to create it.
func InspectStream(ctx context.Context, js jetstream.JetStream, name string, tmpl *Template) (StreamInfo, error) {
	stream, err := js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return StreamInfo{}, missingStream(name, tmpl)
	case errors.Is(err, jetstream.ErrInvalidStreamName):
		return StreamInfo{}, &StreamError{Stream: name, Problem: "is not a valid stream name", Fix: "use letters, digits, - and _ (--stream)", Err: err}
	case err != nil:
		return StreamInfo{}, fmt.Errorf("read stream %q: %w", name, err)
	}
	info := stream.CachedInfo()
	cfg := info.Config
	out := StreamInfo{
		Name: cfg.Name, Subjects: cfg.Subjects, Messages: info.State.Msgs, Bytes: info.State.Bytes,
		Replicas: max(cfg.Replicas, 1), Storage: strings.ToLower(cfg.Storage.String()), DuplicateWindow: cfg.Duplicates,
	}
	warnings, err := checkStream(cfg, tmpl)
	if err != nil {
		warnings = append(warnings, err.Error()) // outboxd run would stop on it
	}
	out.Warnings = warnings
	return out, nil
}
