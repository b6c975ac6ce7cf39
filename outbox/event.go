package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/outboxd/outboxd/event"
)

// Event is one event to emit.
type Event struct {
	// ID becomes the message's Nats-Msg-Id, which JetStream and consumers
	// deduplicate by. The zero value means: generate a new one (UUID
	// version 7, time-ordered, which keeps the table's primary key index
	// compact).
	ID uuid.UUID
	// AggregateType names the kind of entity, e.g. "order". Required.
	AggregateType string
	// AggregateID identifies the entity, e.g. "42". Required.
	AggregateID string
	// EventType names what happened, e.g. "order.created". Required.
	// outboxd's default subject template publishes a dotted type as
	// several subject tokens: outbox.order.order.created.
	EventType string
	// Payload is the message body: any JSON value, as text. Required.
	Payload json.RawMessage
	// Headers become message headers. Names must be valid NATS header
	// names and may not start with "Nats-" (those steer JetStream); values
	// may not hold control characters other than tab.
	Headers map[string]string
}

// ErrInvalidEvent is matched (errors.Is) by every *EventError.
var ErrInvalidEvent = errors.New("invalid outbox event")

// EventError reports an event that was not written because outboxd could not
// publish it as it is. Nothing of the call that returned it was written.
type EventError struct {
	// Index is the event's position in the batch (0 for Emit).
	Index int
	// Field is the Event field at fault, e.g. "EventType" or "Headers".
	Field string
	// Reason says what is wrong and how to fix it.
	Reason string
}

// Error names the event, the field and the reason.
func (e *EventError) Error() string {
	return fmt.Sprintf("outbox event %d: %s %s", e.Index, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidEvent) true.
func (e *EventError) Is(target error) bool { return target == ErrInvalidEvent }

// check returns an *EventError for the first problem of ev (whose ID is
// set), or nil. The envelope's rules are those outboxd applies to every
// event, row or message (one definition, in package decoder); the header
// rules are the sink's.
func (ev *Event) check(index int) error {
	bad := func(field, reason string) error { return &EventError{Index: index, Field: field, Reason: reason} }
	env := ev.asEnvelope()
	var envErr *event.EnvelopeError
	if err := env.Validate(); errors.As(err, &envErr) {
		return bad(eventField[envErr.Key], envErr.Reason)
	} else if err != nil {
		return bad("Payload", err.Error())
	}
	for key, value := range ev.Headers {
		if len(key) >= 5 && strings.EqualFold(key[:5], "Nats-") {
			return bad("Headers", fmt.Sprintf("has header %q, a name reserved for JetStream: outboxd sets Nats-Msg-Id from the event ID; use another name", key))
		}
		if err := event.CheckHeader(key, value); err != nil {
			return bad("Headers", "has "+err.Error())
		}
	}
	return nil
}

// eventField maps an envelope key to the Event field it comes from.
var eventField = map[string]string{
	"id": "ID", "aggregate_type": "AggregateType", "aggregate_id": "AggregateID", "event_type": "EventType",
	"payload": "Payload", "headers": "Headers",
}

func (ev *Event) asEnvelope() event.Envelope {
	return event.Envelope{ID: ev.ID.String(), AggregateType: ev.AggregateType, AggregateID: ev.AggregateID,
		EventType: ev.EventType, Payload: ev.Payload, Headers: ev.Headers}
}

// headersValue is the headers column's value: NULL for no headers.
func (ev *Event) headersValue() any {
	if len(ev.Headers) == 0 {
		return nil
	}
	return ev.Headers
}

// envelope is the content of the logical message outboxd decodes in
// message mode (README, "Logical-message mode").
func (ev *Event) envelope() ([]byte, error) {
	return json.Marshal(ev.asEnvelope())
}
