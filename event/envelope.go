package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
)

// Envelope is the content of a logical decoding message that carries an
// outbox event (message mode, README "Logical-message mode"): a JSON object
//
//	{"id": "0193a1b2-...", "aggregate_type": "order", "aggregate_id": "42",
//	 "event_type": "order.created", "payload": {"total": 9.5},
//	 "headers": {"Trace-Id": "abc"}}
//
// emitted with pg_logical_emit_message(true, 'outbox', envelope). It is the
// one definition of the format: the decoder parses it with ParseEnvelope,
// the outbox package builds and checks it with Validate, and the SQL
// function outbox_emit_message writes the same keys.
type Envelope struct {
	// ID becomes Nats-Msg-Id. Required: a non-empty string (outboxd's
	// producers write a UUID).
	ID string `json:"id"`
	// AggregateType, AggregateID and EventType are required non-blank
	// strings without control characters: they become headers and may
	// fill subject placeholders.
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
	EventType     string `json:"event_type"`
	// Payload is any JSON value (null too); it is published as the
	// message body exactly as written in the envelope. Required.
	Payload json.RawMessage `json:"payload"`
	// Headers is optional: a JSON object of strings, or null. Names and
	// values follow the rules of a headers column (CheckHeader).
	Headers map[string]string `json:"headers,omitempty"`
}

// EnvelopeError reports why a message's content is not a valid Envelope.
type EnvelopeError struct {
	// Key is the envelope key at fault (e.g. "event_type"), or "" when the
	// content as a whole is the problem (not a JSON object).
	Key string
	// Reason says what is wrong and how to fix it.
	Reason string
}

// Error names the key and the reason.
func (e *EnvelopeError) Error() string {
	if e.Key == "" {
		return "outbox envelope " + e.Reason
	}
	return fmt.Sprintf("outbox envelope key %q %s", e.Key, e.Reason)
}

// envelopeKeys are the keys an envelope may have, in documentation order.
var envelopeKeys = []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers"}

// ParseEnvelope reads and validates a message's content. Errors are an
// *EnvelopeError naming the key: the content is not UTF-8 JSON or not an
// object, a key is unknown, a required key is missing or has the wrong JSON
// type, or a value breaks Validate's rules. The returned envelope's
// Payload aliases content.
func ParseEnvelope(content []byte) (Envelope, error) {
	var env Envelope
	if !utf8.Valid(content) || !json.Valid(content) {
		return env, &EnvelopeError{Reason: "is not valid JSON (UTF-8 text): emit a JSON object, e.g. with outbox_emit_message(...)"}
	}
	trimmed := bytes.TrimLeft(content, " \t\r\n")
	if trimmed[0] != '{' {
		return env, &EnvelopeError{Reason: fmt.Sprintf("is a JSON %s, want an object with keys %s", jsonKind(trimmed[0]), strings.Join(envelopeKeys, ", "))}
	}
	// Duplicate keys keep the last value, as jsonb does.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(content, &fields); err != nil {
		return env, &EnvelopeError{Reason: "could not be read as a JSON object: " + err.Error()}
	}
	for _, key := range sortedKeys(fields) {
		if !slices.Contains(envelopeKeys, key) {
			return env, &EnvelopeError{Key: key, Reason: fmt.Sprintf("is not an envelope key: use only %s", strings.Join(envelopeKeys, ", "))}
		}
	}
	for _, f := range [...]struct {
		key string
		to  *string
	}{{"id", &env.ID}, {"aggregate_type", &env.AggregateType}, {"aggregate_id", &env.AggregateID}, {"event_type", &env.EventType}} {
		raw, ok := fields[f.key]
		if !ok {
			return env, &EnvelopeError{Key: f.key, Reason: "is missing: every event needs one"}
		}
		if c := firstByte(raw); c != '"' {
			return env, &EnvelopeError{Key: f.key, Reason: fmt.Sprintf("is a JSON %s, want a string", jsonKind(c))}
		}
		if err := json.Unmarshal(raw, f.to); err != nil {
			return env, &EnvelopeError{Key: f.key, Reason: "could not be read: " + err.Error()}
		}
	}
	payload, ok := fields["payload"]
	if !ok {
		return env, &EnvelopeError{Key: "payload", Reason: `is missing: pass a JSON value, e.g. {} (or null) for an event without data`}
	}
	env.Payload = payload
	if raw, ok := fields["headers"]; ok && firstByte(raw) != 'n' {
		hs, err := ParseHeaders(raw)
		if err != nil {
			return env, &EnvelopeError{Key: "headers", Reason: err.Error()}
		}
		if len(hs) > 0 {
			env.Headers = make(map[string]string, len(hs))
			for _, h := range hs {
				env.Headers[h.Key] = h.Value
			}
		}
	}
	if err := env.Validate(); err != nil {
		return env, err
	}
	return env, nil
}

// Validate reports the first value that outboxd would not publish, as an
// *EnvelopeError, or returns nil. Header names and values are checked later,
// when the message is built, with the same rules as a headers column.
func (e *Envelope) Validate() error {
	if e.ID == "" {
		return &EnvelopeError{Key: "id", Reason: "is empty: every event needs an id (it becomes Nats-Msg-Id)"}
	}
	for _, f := range [...]struct{ key, value string }{
		{"id", e.ID}, {"aggregate_type", e.AggregateType}, {"aggregate_id", e.AggregateID}, {"event_type", e.EventType},
	} {
		if strings.TrimSpace(f.value) == "" {
			return &EnvelopeError{Key: f.key, Reason: "is empty: every event needs one"}
		}
		// These values become Nats-Msg-Id and Outbox-* headers.
		if i := strings.IndexFunc(f.value, unicode.IsControl); i >= 0 {
			return &EnvelopeError{Key: f.key, Reason: fmt.Sprintf("%q holds a control character at byte %d: remove line breaks and tabs", f.value, i)}
		}
		if !utf8.ValidString(f.value) {
			return &EnvelopeError{Key: f.key, Reason: fmt.Sprintf("%q is not valid UTF-8", f.value)}
		}
	}
	if len(bytes.TrimSpace(e.Payload)) == 0 {
		return &EnvelopeError{Key: "payload", Reason: "is empty: pass a JSON value, e.g. {} for an event without data"}
	}
	if !utf8.Valid(e.Payload) || !json.Valid(e.Payload) {
		return &EnvelopeError{Key: "payload", Reason: "is not valid JSON (UTF-8 text)"}
	}
	for _, key := range sortedKeys(e.Headers) {
		if !utf8.ValidString(key) || !utf8.ValidString(e.Headers[key]) {
			return &EnvelopeError{Key: "headers", Reason: fmt.Sprintf("has header %q that is not valid UTF-8", key)}
		}
	}
	return nil
}

// Event returns the event the envelope describes, as committed in tx and
// carried by the message at lsn.
func (e *Envelope) Event(tx TxInfo, lsn pglogrepl.LSN) *Event {
	ev := &Event{
		Tx: tx, LSN: lsn, ID: e.ID, AggregateType: e.AggregateType, AggregateID: e.AggregateID,
		EventType: e.EventType, Payload: e.Payload, FromMessage: true,
	}
	// Sorted, so the order of the message's headers does not depend on
	// map iteration.
	for _, key := range sortedKeys(e.Headers) {
		ev.Headers = append(ev.Headers, Header{Key: key, Value: e.Headers[key]})
	}
	return ev
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// firstByte is the first byte of valid JSON text after white space.
func firstByte(raw []byte) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}
