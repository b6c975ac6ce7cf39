package event

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// envelopeSeeds are message contents: valid envelopes, each kind of bad one.
func envelopeSeeds() map[string][]byte {
	return map[string][]byte{
		"full":         []byte(testEnvelope),
		"minimal":      []byte(`{"id":"x","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":null}`),
		"escapes":      []byte(`{"id":"\u0078","aggregate_type":"caf\u00e9","aggregate_id":"1","event_type":"e","payload":"\n","headers":{"K":"\t"}}`),
		"duplicate":    []byte(`{"id":"x","id":"y","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":1}`),
		"unknown-key":  []byte(`{"id":"x","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":1,"extra":2}`),
		"wrong-type":   []byte(`{"id":1,"aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":1}`),
		"bad-headers":  []byte(`{"id":"x","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":1,"headers":{"a":[1]}}`),
		"not-json":     []byte(`{"id":`),
		"array":        []byte(`[{"id":"x"}]`),
		"control-char": []byte(`{"id":"x\r\nNats-Msg-Id: y","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":1}`),
	}
}

// FuzzEnvelope: ParseEnvelope never panics; what it accepts passes
// Validate, and marshals (as the outbox package does) to an envelope that
// parses back to the same.
func FuzzEnvelope(f *testing.F) {
	for _, seed := range envelopeSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		env, err := ParseEnvelope(content)
		if err != nil {
			var envErr *EnvelopeError
			if !errors.As(err, &envErr) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if err := env.Validate(); err != nil {
			t.Fatalf("ParseEnvelope accepted %q, Validate refuses it: %v", content, err)
		}
		raw, err := json.Marshal(env)
		if err != nil {
			t.Fatalf("marshal %+v: %v", env, err)
		}
		again, err := ParseEnvelope(raw)
		if err != nil {
			t.Fatalf("%q parsed, its marshalled form %q does not: %v", content, raw, err)
		}
		if again.ID != env.ID || again.AggregateType != env.AggregateType || again.AggregateID != env.AggregateID ||
			again.EventType != env.EventType || !reflect.DeepEqual(again.Headers, env.Headers) || !jsonEqual(t, again.Payload, env.Payload) {
			t.Fatalf("%q parsed as %+v, its marshalled form as %+v", content, env, again)
		}
	})
}

// jsonEqual compares two JSON texts by value (Marshal compacts a payload).
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(va, vb)
}
