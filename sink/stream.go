package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamError is a problem with the JetStream stream that retrying cannot
// fix. It names the stream, what is wrong and the fix.
type StreamError struct {
	Stream  string
	Problem string
	Fix     string
	// Err is the JetStream error underneath, if any
	// (errors.Is(err, jetstream.ErrStreamNotFound) for a missing stream).
	Err error
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("stream %q %s; fix: %s", e.Stream, e.Problem, e.Fix)
}

func (e *StreamError) Unwrap() error { return e.Err }

// missingStream is the error for a stream that does not exist and that
// outboxd was not asked to create.
func missingStream(name string, tmpl *Template) *StreamError {
	return missingStreamCapturing(name, tmpl, "")
}

// missingStreamCapturing is missingStream for a stream that is to capture
// the dead-letter subject extra too ("" for none).
func missingStreamCapturing(name string, tmpl *Template, extra string) *StreamError {
	// The subjects --create-stream gives it (outbox.>), so that the fix and
	// the flag make the same stream; the template's filter (outbox.*.>)
	// only where it has no literal prefix to capture under.
	subject, err := tmpl.StreamSubject()
	if err != nil {
		subject = tmpl.Filter()
	}
	subjects := fmt.Sprintf("--subjects '%s'", subject)
	if extra != "" {
		subjects += fmt.Sprintf(" --subjects '%s'", extra)
	}
	return &StreamError{Stream: name, Problem: "does not exist", Err: jetstream.ErrStreamNotFound,
		Fix: fmt.Sprintf("create it (nats stream add %s %s --storage file --dupe-window 2m) or pass --create-stream", name, subjects)}
}

// StreamOption is a setting of EnsureStream.
type StreamOption func(*streamOptions)

type streamOptions struct {
	deadLetter string
}

// WithDeadLetter names the --dead-letter subject ("" for none): a stream
// EnsureStream creates also captures it, unless the template's subjects
// or another stream already do, so that dead letters are stored. It
// changes no existing stream; CheckDeadLetter still checks that some
// stream captures the subject.
func WithDeadLetter(subject string) StreamOption {
	return func(o *streamOptions) { o.deadLetter = subject }
}

// DefaultDuplicateWindow is the duplicate window of a stream outboxd
// creates. Restarts replay at most what was in flight, so a replay reaches
// the stream well within it.
const DefaultDuplicateWindow = 2 * time.Minute

// EnsureStream checks that the stream exists and captures every subject the
// template renders; when it is missing and create is set, it creates it with
// file storage, the template's StreamSubject (and the WithDeadLetter
// subject when nothing else captures it) and DefaultDuplicateWindow,
// allowing fast and atomic batch publishing where the server takes them. It
// returns warnings about settings that can silently lose or repeat messages.
func EnsureStream(ctx context.Context, js jetstream.JetStream, name string, tmpl *Template, create bool, opts ...StreamOption) ([]string, error) {
	var o streamOptions
	for _, opt := range opts {
		opt(&o)
	}
	stream, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		subject, serr := tmpl.StreamSubject()
		extra, xerr := uncapturedDeadLetter(ctx, js, subject, o.deadLetter)
		if xerr != nil {
			return nil, xerr
		}
		if !create {
			return nil, missingStreamCapturing(name, tmpl, extra)
		}
		if serr != nil {
			return nil, &StreamError{Stream: name, Problem: "does not exist and cannot be created", Fix: serr.Error()}
		}
		subjects := []string{subject}
		if extra != "" {
			subjects = append(subjects, extra)
		}
		info, aerr := js.AccountInfo(ctx)
		if aerr != nil {
			return nil, fmt.Errorf("read JetStream account info: %w", aerr)
		}
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name:       name,
			Subjects:   subjects,
			Storage:    jetstream.FileStorage,
			Duplicates: DefaultDuplicateWindow,
			// Only where the server takes them: the fields raise the
			// stream's required API level to 4 and 2.
			AllowBatchPublish:  info.API.Level >= fastBatchAPILevel,
			AllowAtomicPublish: info.API.Level >= atomicAPILevel,
		})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("create stream %q: %w", name, err)
		}
		stream, err = js.Stream(ctx, name)
	}
	if errors.Is(err, jetstream.ErrInvalidStreamName) {
		return nil, &StreamError{Stream: name, Problem: "is not a valid stream name", Fix: "use letters, digits, - and _ (--stream)"}
	}
	if err != nil {
		return nil, fmt.Errorf("read stream %q: %w", name, err)
	}
	return checkStream(stream.CachedInfo().Config, tmpl)
}

func checkStream(cfg jetstream.StreamConfig, tmpl *Template) ([]string, error) {
	filter := tmpl.Filter()
	covered := false
	for _, s := range cfg.Subjects {
		covered = covered || subjectCovers(s, filter)
	}
	if !covered {
		return nil, &StreamError{Stream: cfg.Name,
			Problem: fmt.Sprintf("captures %q, which does not cover the subjects %q of template %q", cfg.Subjects, filter, tmpl),
			Fix:     fmt.Sprintf("add the subject to the stream (nats stream edit %s --subjects '%s') or change --subject", cfg.Name, filter)}
	}
	var warnings []string
	if cfg.Storage != jetstream.FileStorage {
		warnings = append(warnings, fmt.Sprintf("stream %q uses memory storage: acknowledged events are lost when the server restarts; use file storage", cfg.Name))
	}
	if cfg.Duplicates < time.Minute {
		warnings = append(warnings, fmt.Sprintf("stream %q has a duplicate window of %s: a replay after a restart that reaches it later than that is stored twice; use at least 1m (2m is the default)", cfg.Name, cfg.Duplicates))
	}
	if cfg.Discard == jetstream.DiscardOld && (cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 || cfg.MaxAge > 0) {
		warnings = append(warnings, fmt.Sprintf("stream %q discards old messages at its limits (max msgs %d, max bytes %d, max age %s): acknowledged events can be evicted before consumers read them", cfg.Name, cfg.MaxMsgs, cfg.MaxBytes, cfg.MaxAge))
	}
	return warnings, nil
}

// uncapturedDeadLetter returns the dead-letter subject when a stream
// created with subject would have to capture it too: it is set, subject
// does not cover it, and no other stream captures it ("" otherwise).
// subject is "" when the template gives none.
func uncapturedDeadLetter(ctx context.Context, js jetstream.JetStream, subject, deadLetter string) (string, error) {
	if deadLetter == "" || subject != "" && subjectCovers(subject, deadLetter) {
		return "", nil
	}
	if err := checkDeadLetterSubject(deadLetter); err != nil {
		return "", err
	}
	_, err := js.StreamNameBySubject(ctx, deadLetter)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return deadLetter, nil
	case err != nil:
		return "", fmt.Errorf("find the stream for dead-letter subject %q: %w", deadLetter, err)
	}
	return "", nil
}

// checkDeadLetterSubject refuses a dead-letter subject that is not plain.
func checkDeadLetterSubject(subject string) error {
	if err := validSubject(subject); err != nil || strings.ContainsAny(subject, "*> \t\r\n") {
		return &StreamError{Stream: "for dead letters", Problem: fmt.Sprintf("cannot use subject %q", subject),
			Fix: "pass --dead-letter a plain subject without wildcards or spaces, e.g. outbox.dead-letter"}
	}
	return nil
}

// CheckDeadLetter checks that the dead-letter subject is a plain subject and
// that some stream captures it, so dead-lettered rows are stored, not lost.
// It returns the name of that stream.
func CheckDeadLetter(ctx context.Context, js jetstream.JetStream, subject string) (string, error) {
	if err := checkDeadLetterSubject(subject); err != nil {
		return "", err
	}
	name, err := js.StreamNameBySubject(ctx, subject)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", &StreamError{Stream: "for dead letters", Problem: fmt.Sprintf("does not exist: no stream captures subject %q", subject),
			Fix: fmt.Sprintf("choose a --dead-letter subject your stream captures, or create one (nats stream add DEAD_LETTER --subjects '%s')", subject)}
	}
	if err != nil {
		return "", fmt.Errorf("find the stream for dead-letter subject %q: %w", subject, err)
	}
	return name, nil
}
