package sink

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
)

func TestInspectStream(t *testing.T) {
	ctx := testCtx(t)
	js := natstest.Start(t).JetStream(t)
	tmpl := testTemplate(t, defaultTemplate)

	_, err := InspectStream(ctx, js, "OUTBOX", tmpl)
	var serr *StreamError
	if !errors.As(err, &serr) || !errors.Is(err, jetstream.ErrStreamNotFound) || !strings.Contains(err.Error(), "nats stream add OUTBOX") {
		t.Fatalf("InspectStream of a missing stream = %v, want a *StreamError matching ErrStreamNotFound with the command that creates it", err)
	}
	if _, err := js.Stream(ctx, "OUTBOX"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("InspectStream created the stream (%v)", err)
	}
	if _, err := InspectStream(ctx, js, "bad.name", tmpl); !errors.As(err, &serr) || !strings.Contains(err.Error(), "not a valid stream name") {
		t.Errorf("InspectStream of a bad name = %v, want a StreamError saying so", err)
	}

	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"},
		Storage: jetstream.MemoryStorage, Duplicates: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "outbox.order.Created", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	info, err := InspectStream(ctx, js, "OUTBOX", tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "OUTBOX" || !slices.Equal(info.Subjects, []string{"outbox.>"}) || info.Messages != 3 || info.Bytes == 0 ||
		info.Replicas != 1 || info.Storage != "memory" || info.DuplicateWindow != 30*time.Second {
		t.Errorf("InspectStream = %+v, want OUTBOX on outbox.> with 3 messages, R1, memory, 30s window", info)
	}
	joined := strings.Join(info.Warnings, "\n")
	if len(info.Warnings) != 2 || !strings.Contains(joined, "memory storage") || !strings.Contains(joined, "duplicate window of 30s") {
		t.Errorf("warnings = %q, want memory storage and the short duplicate window", info.Warnings)
	}

	// Subjects that miss the template are what outboxd run stops on: here a warning.
	info, err = InspectStream(ctx, js, "OUTBOX", testTemplate(t, "events.{event_type}"))
	if err != nil || !strings.Contains(strings.Join(info.Warnings, "\n"), "does not cover") {
		t.Errorf("InspectStream with an uncovered template = %q, %v; want a warning that it does not cover it", info.Warnings, err)
	}
}
