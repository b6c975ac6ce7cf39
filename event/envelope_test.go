package event

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const testID = "0190c1d2-7e4f-7a3b-9c1d-2e3f4a5b6c7d"

const testEnvelope = `{"id": "` + testID + `", "aggregate_type": "order", "aggregate_id": "42", "event_type": "order.created", "payload": {"total": 9.5}, "headers": {"Trace-Id": "abc", "A": "1"}}`

func TestParseEnvelope(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    Envelope
	}{
		{"full", testEnvelope, Envelope{ID: testID, AggregateType: "order", AggregateID: "42", EventType: "order.created",
			Payload: json.RawMessage(`{"total": 9.5}`), Headers: map[string]string{"Trace-Id": "abc", "A": "1"}}},
		{"null payload, no headers", `{"id":"x","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":null}`,
			Envelope{ID: "x", AggregateType: "a", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`null`)}},
		{"null and empty headers", `{"id":"x","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":[1],"headers":null}`,
			Envelope{ID: "x", AggregateType: "a", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`[1]`)}},
		{"escapes and white space", " {\"id\":\"x\",\"aggregate_type\":\"caf\\u00e9\",\"aggregate_id\":\"1\",\"event_type\":\"e\",\"payload\":\"s\",\"headers\":{}}\n",
			Envelope{ID: "x", AggregateType: "café", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`"s"`)}},
		{"duplicate key: the last wins, as in jsonb", `{"id":"x","id":"y","aggregate_type":"a","aggregate_id":"1","event_type":"e","payload":1}`,
			Envelope{ID: "y", AggregateType: "a", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`1`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEnvelope([]byte(tt.content))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseEnvelope = %+v, want %+v", got, tt.want)
			}
			// What a producer marshals from it reads back the same.
			raw, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseEnvelope(raw)
			if err == nil && jsonEqual(t, again.Payload, tt.want.Payload) {
				again.Payload = tt.want.Payload // Marshal compacts it
			}
			if err != nil || !reflect.DeepEqual(again, tt.want) {
				t.Fatalf("marshalled %s reads back as %+v, %v", raw, again, err)
			}
		})
	}
}

func TestParseEnvelopeBad(t *testing.T) {
	valid := map[string]string{"id": `"x"`, "aggregate_type": `"order"`, "aggregate_id": `"1"`, "event_type": `"e"`, "payload": `{}`}
	with := func(key, value string) string { // value "" drops the key
		var parts []string
		for _, k := range envelopeKeys {
			v, ok := valid[k]
			if k == key {
				v, ok = value, value != ""
			}
			if ok {
				parts = append(parts, `"`+k+`": `+v)
			}
		}
		if _, known := valid[key]; !known && key != "headers" && value != "" {
			parts = append(parts, `"`+key+`": `+value)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	tests := []struct {
		name, content, wantKey, wantErr string
	}{
		{"not JSON", `{"id": `, "", "is not valid JSON"},
		{"not UTF-8", "{\"id\": \"\xff\"}", "", "is not valid JSON"},
		{"empty", ``, "", "is not valid JSON"},
		{"array", `[1, 2]`, "", "is a JSON array, want an object"},
		{"string", `"order.created"`, "", "is a JSON string, want an object"},
		{"unknown key", with("created_at", `"2026-12-03"`), "created_at", "is not an envelope key"},
		{"missing id", with("id", ""), "id", "is missing"},
		{"empty id", with("id", `""`), "id", "is empty"},
		{"numeric id", with("id", `42`), "id", "is a JSON number, want a string"},
		{"null id", with("id", `null`), "id", "is a JSON null, want a string"},
		{"id with a line break", with("id", `"a\nb"`), "id", "control character"},
		{"missing aggregate type", with("aggregate_type", ""), "aggregate_type", "is missing"},
		{"blank aggregate id", with("aggregate_id", `"  "`), "aggregate_id", "is empty"},
		{"object aggregate id", with("aggregate_id", `{"a": 1}`), "aggregate_id", "is a JSON object, want a string"},
		{"boolean event type", with("event_type", `true`), "event_type", "is a JSON boolean, want a string"},
		{"event type with a tab", with("event_type", `"a\tb"`), "event_type", "control character"},
		{"missing payload", with("payload", ""), "payload", "is missing"},
		{"headers array", with("headers", `["a"]`), "headers", "is a JSON array, want an object of header values"},
		{"header object", with("headers", `{"Attempt": {"n": 3}}`), "headers", `has header "Attempt" whose value is a JSON object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseEnvelope([]byte(tt.content))
			var envErr *EnvelopeError
			if !errors.As(err, &envErr) || envErr.Key != tt.wantKey || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseEnvelope(%s): err = %v, want an EnvelopeError for key %q mentioning %q", tt.content, err, tt.wantKey, tt.wantErr)
			}
		})
	}
}

// TestEnvelopeValidate covers what only a Go-built envelope can hold.
func TestEnvelopeValidate(t *testing.T) {
	good := func() Envelope {
		return Envelope{ID: "x", AggregateType: "a", AggregateID: "1", EventType: "e", Payload: json.RawMessage(`{}`)}
	}
	tests := []struct {
		name    string
		edit    func(*Envelope)
		wantKey string
	}{
		{"no payload", func(e *Envelope) { e.Payload = nil }, "payload"},
		{"payload not JSON", func(e *Envelope) { e.Payload = json.RawMessage(`{`) }, "payload"},
		{"payload not UTF-8", func(e *Envelope) { e.Payload = json.RawMessage("\"\xff\"") }, "payload"},
		{"aggregate type not UTF-8", func(e *Envelope) { e.AggregateType = "\xff" }, "aggregate_type"},
		{"header value not UTF-8", func(e *Envelope) { e.Headers = map[string]string{"A": "\xff"} }, "headers"},
	}
	e := good()
	if err := e.Validate(); err != nil {
		t.Fatalf("valid envelope: %v", err)
	}
	for _, tt := range tests {
		e := good()
		tt.edit(&e)
		var envErr *EnvelopeError
		if err := e.Validate(); !errors.As(err, &envErr) || envErr.Key != tt.wantKey {
			t.Errorf("%s: Validate = %v, want an EnvelopeError for key %q", tt.name, err, tt.wantKey)
		}
	}
}
