package sink

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Observer is told the outcome of publishes, for metrics. The publisher
// calls it on its own goroutine for every message, so an implementation
// must be cheap: no blocking, no allocation.
type Observer interface {
	// Published reports an event JetStream acknowledged, with its
	// transaction's commit time; duplicate is true when JetStream already
	// held its Nats-Msg-Id and dropped the repeat.
	Published(committed time.Time, duplicate bool)
	// DeadLettered reports a dead-letter message JetStream acknowledged.
	DeadLettered()
	// PublishFailed reports a failed publish or republish, with one of the
	// Reason* constants.
	PublishFailed(reason string)
}

// Reasons a publish fails, as PublishFailed reports them.
const (
	ReasonTimeout           = "timeout"             // no acknowledgement in time
	ReasonNoResponders      = "no_responders"       // no stream leader answered the subject
	ReasonDisconnected      = "disconnected"        // the NATS connection was down
	ReasonWrongLastSequence = "wrong_last_sequence" // exclusive mode: a predecessor is missing
	ReasonRejected          = "rejected"            // JetStream refused it (another API error)
	ReasonOther             = "other"
)

// Reasons lists every reason PublishFailed may report, so a metric can
// show each one from the start.
var Reasons = []string{ReasonTimeout, ReasonNoResponders, ReasonDisconnected, ReasonWrongLastSequence, ReasonRejected, ReasonOther}

// failureReason classifies a publish error.
func failureReason(err error) string {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		return ReasonNoResponders
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrReconnectBufExceeded): // nothing is buffered while reconnecting
		return ReasonDisconnected
	case errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant):
		return ReasonWrongLastSequence
	case errors.As(err, &apiErr):
		return ReasonRejected
	}
	return ReasonOther
}

// nopObserver is the default Observer.
type nopObserver struct{}

func (nopObserver) Published(time.Time, bool) {}
func (nopObserver) DeadLettered()             {}
func (nopObserver) PublishFailed(string)      {}
