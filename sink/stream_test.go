package sink

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
)

// defaultTemplate is relay.DefaultSubject, outboxd's default template.
const defaultTemplate = "outbox.{aggregate_type}.{event_type|tokens}"

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestEnsureStreamMissing(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	tmpl := testTemplate(t, defaultTemplate)

	warnings, err := EnsureStream(ctx, js, "OUTBOX", tmpl, false)
	var serr *StreamError
	if !errors.As(err, &serr) {
		t.Fatalf("EnsureStream = %v, %v; want a *StreamError", warnings, err)
	}
	if serr.Stream != "OUTBOX" || !strings.Contains(serr.Problem, "does not exist") {
		t.Errorf("StreamError = %+v, want stream OUTBOX that does not exist", serr)
	}
	for _, want := range []string{"--create-stream", `"OUTBOX"`, "--subjects 'outbox.>'", "--storage file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := js.Stream(ctx, "OUTBOX"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream after EnsureStream without create: %v, want ErrStreamNotFound", err)
	}
}

func TestEnsureStreamCreate(t *testing.T) {
	ctx := testCtx(t)
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	tmpl := testTemplate(t, defaultTemplate)

	warnings, err := EnsureStream(ctx, js, "OUTBOX", tmpl, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings for a stream outboxd created: %q", warnings)
	}
	stream, err := js.Stream(ctx, "OUTBOX")
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	if cfg.Storage != jetstream.FileStorage {
		t.Errorf("storage = %v, want file", cfg.Storage)
	}
	if !slices.Equal(cfg.Subjects, []string{"outbox.>"}) {
		t.Errorf("subjects = %q, want [outbox.>]", cfg.Subjects)
	}
	if cfg.Duplicates != 2*time.Minute {
		t.Errorf("duplicate window = %s, want 2m", cfg.Duplicates)
	}

	// Existing now: a second call (a restart) neither fails nor warns.
	warnings, err = EnsureStream(ctx, js, "OUTBOX", tmpl, true)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("second EnsureStream = %q, %v; want no warnings and no error", warnings, err)
	}
	warnings, err = EnsureStream(ctx, js, "OUTBOX", tmpl, false)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("EnsureStream without create on the existing stream = %q, %v", warnings, err)
	}
}

func TestEnsureStreamCreateLiteralTemplate(t *testing.T) {
	ctx := testCtx(t)
	js := natstest.Start(t).JetStream(t)
	if _, err := EnsureStream(ctx, js, "EVENTS", testTemplate(t, "outbox.events"), true); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if got := stream.CachedInfo().Config.Subjects; !slices.Equal(got, []string{"outbox.events"}) {
		t.Errorf("subjects = %q, want [outbox.events]", got)
	}
}

// TestEnsureStreamCreateDeadLetter: a stream --create-stream makes also
// captures the --dead-letter subject when neither its own subjects nor
// another stream do, so that CheckDeadLetter then finds it.
func TestEnsureStreamCreateDeadLetter(t *testing.T) {
	tests := []struct {
		name       string
		template   string
		deadLetter string
		other      []string // subjects of a stream DEAD made first, if any
		want       []string // the created stream's subjects
		wantDead   string   // the stream CheckDeadLetter finds
	}{
		{name: "fixed subject", template: "outbox.events", deadLetter: "outbox.dead",
			want: []string{"outbox.events", "outbox.dead"}, wantDead: "OUTBOX"},
		{name: "single token", template: "outbox", deadLetter: "outbox-dead",
			want: []string{"outbox", "outbox-dead"}, wantDead: "OUTBOX"},
		{name: "template captures it", template: defaultTemplate, deadLetter: "outbox.dead-letter",
			want: []string{"outbox.>"}, wantDead: "OUTBOX"},
		{name: "template does not capture it", template: defaultTemplate, deadLetter: "dead.outbox",
			want: []string{"outbox.>", "dead.outbox"}, wantDead: "OUTBOX"},
		{name: "another stream captures it", template: "outbox.events", deadLetter: "outbox.dead", other: []string{"outbox.dead"},
			want: []string{"outbox.events"}, wantDead: "DEAD"},
		{name: "another stream captures it by wildcard", template: "outbox.events", deadLetter: "dead.outbox", other: []string{"dead.>"},
			want: []string{"outbox.events"}, wantDead: "DEAD"},
		{name: "no dead letter", template: "outbox.events", want: []string{"outbox.events"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			js := natstest.Start(t).JetStream(t)
			if tt.other != nil {
				if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DEAD", Subjects: tt.other, Storage: jetstream.FileStorage}); err != nil {
					t.Fatal(err)
				}
			}
			tmpl := testTemplate(t, tt.template)
			// Twice: the second run (a restart) finds the stream made by the first.
			for range 2 {
				warnings, err := EnsureStream(ctx, js, "OUTBOX", tmpl, true, WithDeadLetter(tt.deadLetter))
				if err != nil || len(warnings) != 0 {
					t.Fatalf("EnsureStream = %q, %v; want no warnings and no error", warnings, err)
				}
			}
			stream, err := js.Stream(ctx, "OUTBOX")
			if err != nil {
				t.Fatal(err)
			}
			if got := stream.CachedInfo().Config.Subjects; !slices.Equal(got, tt.want) {
				t.Errorf("subjects = %q, want %q", got, tt.want)
			}
			if tt.deadLetter == "" {
				return
			}
			if got, err := CheckDeadLetter(ctx, js, tt.deadLetter); err != nil || got != tt.wantDead {
				t.Errorf("CheckDeadLetter = %q, %v; want stream %q", got, err, tt.wantDead)
			}
			// What a stored dead letter needs: the stream takes a message on it.
			if _, err := js.Publish(ctx, tt.deadLetter, []byte("dead")); err != nil {
				t.Errorf("publish to the dead-letter subject: %v", err)
			}
		})
	}
}

// TestEnsureStreamMissingDeadLetter: without --create-stream, the command
// the error suggests makes the stream --create-stream would, dead-letter
// subject included; a dead-letter subject that is not plain is refused
// before any stream is made.
func TestEnsureStreamMissingDeadLetter(t *testing.T) {
	ctx := testCtx(t)
	js := natstest.Start(t).JetStream(t)
	tmpl := testTemplate(t, "outbox.events")
	_, err := EnsureStream(ctx, js, "OUTBOX", tmpl, false, WithDeadLetter("outbox.dead"))
	if want := "nats stream add OUTBOX --subjects 'outbox.events' --subjects 'outbox.dead' --storage file"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("EnsureStream without create = %v, want the fix %q", err, want)
	}
	_, err = EnsureStream(ctx, js, "OUTBOX", tmpl, true, WithDeadLetter("dead.*"))
	var serr *StreamError
	if !errors.As(err, &serr) || !strings.Contains(serr.Problem, `cannot use subject "dead.*"`) {
		t.Errorf("EnsureStream with --dead-letter dead.* = %v, want a *StreamError about the subject", err)
	}
	if _, err := js.Stream(ctx, "OUTBOX"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream after a refused dead-letter subject: %v, want ErrStreamNotFound", err)
	}
}

func TestEnsureStreamCannotCreate(t *testing.T) {
	ctx := testCtx(t)
	js := natstest.Start(t).JetStream(t)
	_, err := EnsureStream(ctx, js, "OUTBOX", testTemplate(t, "{aggregate_type}.events"), true)
	var serr *StreamError
	if !errors.As(err, &serr) {
		t.Fatalf("EnsureStream = %v, want a *StreamError", err)
	}
	if !strings.Contains(serr.Problem, "cannot be created") || !strings.Contains(serr.Fix, "create the stream yourself") {
		t.Errorf("StreamError = %+v, want 'cannot be created' and the fix", serr)
	}
	if _, err := js.Stream(ctx, "OUTBOX"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream: %v, want ErrStreamNotFound", err)
	}
}

func TestEnsureStreamInvalidName(t *testing.T) {
	ctx := testCtx(t)
	js := natstest.Start(t).JetStream(t)
	for _, create := range []bool{false, true} {
		_, err := EnsureStream(ctx, js, "out.box", testTemplate(t, defaultTemplate), create)
		var serr *StreamError
		if !errors.As(err, &serr) || !strings.Contains(serr.Problem, "not a valid stream name") {
			t.Errorf("create=%v: EnsureStream = %v, want a *StreamError about the name", create, err)
		}
	}
}

func TestEnsureStreamNotCovering(t *testing.T) {
	tests := []struct {
		name     string
		subjects []string
		template string
		wantErr  bool
	}{
		{name: "other prefix", subjects: []string{"events.>"}, template: defaultTemplate, wantErr: true},
		{name: "too narrow", subjects: []string{"outbox.order.*"}, template: defaultTemplate, wantErr: true},
		{name: "too short", subjects: []string{"outbox.*"}, template: defaultTemplate, wantErr: true},
		{name: "literal template not captured", subjects: []string{"outbox.a"}, template: "outbox.b", wantErr: true},
		{name: "one token per placeholder", subjects: []string{"outbox.*.*"}, template: defaultTemplate, wantErr: true},
		{name: "exact filter", subjects: []string{"outbox.*.>"}, template: defaultTemplate},
		{name: "exact filter of one token per placeholder", subjects: []string{"outbox.*.*"}, template: "outbox.{aggregate_type}.{event_type}"},
		{name: "one of several", subjects: []string{"events.>", "outbox.>"}, template: defaultTemplate},
		{name: "wildcard token", subjects: []string{"outbox.*.>"}, template: "outbox.{tenant}.{event_type}.v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			js := natstest.Start(t).JetStream(t)
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOX", Subjects: tt.subjects,
				Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			for _, create := range []bool{false, true} {
				warnings, err := EnsureStream(ctx, js, "OUTBOX", testTemplate(t, tt.template), create)
				if !tt.wantErr {
					if err != nil || len(warnings) != 0 {
						t.Fatalf("EnsureStream = %q, %v; want no warnings, no error", warnings, err)
					}
					continue
				}
				var serr *StreamError
				if !errors.As(err, &serr) {
					t.Fatalf("create=%v: EnsureStream = %v, want a *StreamError", create, err)
				}
				for _, want := range []string{"does not cover", tt.template, tt.subjects[0], "--subject", "nats stream edit OUTBOX"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
			}
		})
	}
}

func TestEnsureStreamWarnings(t *testing.T) {
	tests := []struct {
		name string
		cfg  jetstream.StreamConfig
		want []string // one substring per expected warning, in order
	}{
		{name: "safe", cfg: jetstream.StreamConfig{Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}},
		{name: "memory storage", cfg: jetstream.StreamConfig{Storage: jetstream.MemoryStorage, Duplicates: 2 * time.Minute},
			want: []string{"memory storage"}},
		{name: "small duplicate window", cfg: jetstream.StreamConfig{Storage: jetstream.FileStorage, Duplicates: 30 * time.Second},
			want: []string{"duplicate window of 30s"}},
		{name: "one minute is enough", cfg: jetstream.StreamConfig{Storage: jetstream.FileStorage, Duplicates: time.Minute}},
		{name: "discard old with max msgs", cfg: jetstream.StreamConfig{Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
			Discard: jetstream.DiscardOld, MaxMsgs: 1000}, want: []string{"max msgs 1000"}},
		{name: "discard old with max bytes", cfg: jetstream.StreamConfig{Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
			Discard: jetstream.DiscardOld, MaxBytes: 1 << 20}, want: []string{"discards old messages"}},
		{name: "discard old with max age", cfg: jetstream.StreamConfig{Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
			Discard: jetstream.DiscardOld, MaxAge: time.Hour}, want: []string{"max age 1h0m0s"}},
		{name: "discard new with limits", cfg: jetstream.StreamConfig{Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
			Discard: jetstream.DiscardNew, MaxMsgs: 1000, MaxAge: time.Hour}},
		{name: "all three", cfg: jetstream.StreamConfig{Storage: jetstream.MemoryStorage, Duplicates: 10 * time.Second,
			MaxMsgs: 5}, want: []string{"memory storage", "duplicate window of 10s", "max msgs 5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			js := natstest.Start(t).JetStream(t)
			cfg := tt.cfg
			cfg.Name = "OUTBOX"
			cfg.Subjects = []string{"outbox.>"}
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			warnings, err := EnsureStream(ctx, js, "OUTBOX", testTemplate(t, defaultTemplate), false)
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != len(tt.want) {
				t.Fatalf("warnings = %q, want %d matching %q", warnings, len(tt.want), tt.want)
			}
			for i, w := range warnings {
				if !strings.Contains(w, tt.want[i]) || !strings.Contains(w, `"OUTBOX"`) {
					t.Errorf("warning %d = %q, want it to name the stream and contain %q", i, w, tt.want[i])
				}
			}
		})
	}
}
