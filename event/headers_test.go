package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// parseHeadersTokens is the plain encoding/json token-stream reading of a
// headers object: the oracle that parseHeaders must agree with. A number
// is its JSON text, a boolean true or false, a null leaves the header out.
func parseHeadersTokens(v []byte) ([]Header, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var hs []Header
	for dec.More() {
		if tok, err = dec.Token(); err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("key is not a string")
		}
		if tok, err = dec.Token(); err != nil {
			return nil, err
		}
		var val string
		switch tok := tok.(type) {
		case string:
			val = tok
		case json.Number:
			val = string(tok)
		case bool:
			val = strconv.FormatBool(tok)
		case nil:
			continue
		default:
			return nil, fmt.Errorf("value of %q is a %v", key, tok)
		}
		hs = append(hs, Header{Key: key, Value: val})
	}
	if tok, err = dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errors.New("unterminated object")
	}
	if _, err = dec.Token(); err != io.EOF {
		return nil, errors.New("data after the object")
	}
	return hs, nil
}

var headerSamples = []string{
	`{}`,
	` { } `,
	`{"a": "1"}`,
	`{"z": "1", "a": "2", "m": "3"}`,
	"{\n\t\"a\" : \"1\" ,\r\n\"b\":\"\"}",
	`{"k\"1": "caf\u00e9", "k\"1": "2"}`,
	`{"emoji": "\ud83d\ude00", "lone": "\ud800"}`,
	`{"slash": "a\/b", "ctl": "\b\f\n\r\t", "back": "\\"}`,
	"{\"raw\": \"caf\xc3\xa9\", \"bad\": \"\xff\xfe\"}",
	`{"": ""}`,
	`{"a": 1}`,
	`{"a": "1", "b": 2.5e3}`,
	`{"a":-0.5E-3,"b":false}`,
	"{\"a\":1\n,\"b\":true\t}",
	`{"a": true}`,
	`{"a": null}`,
	`{"a": null, "b": null}`,
	`{"a": null, "b": "x", "c": 0}`,
	`{"a": {}}`,
	`{"a": []}`,
	`{"a": {"b": "c"}}`,
	`{"a": ["b"]}`,
	`[]`,
	`"a"`,
	`null`,
	`1`,
	``,
	` `,
	`{`,
	`{"a": "b"`,
	`{"a": "b",}`,
	`{"a" "b"}`,
	`{"a": "b"} {}`,
	`{"a": "b"} x`,
	"{\"a\": \"b\x01\"}",
	`{'a': 'b'}`,
}

func TestParseHeadersMatchesTokenStream(t *testing.T) {
	for _, in := range headerSamples {
		t.Run(in, func(t *testing.T) { compareHeaders(t, []byte(in)) })
	}
}

func FuzzParseHeaders(f *testing.F) {
	for _, in := range headerSamples {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) { compareHeaders(t, data) })
}

func compareHeaders(t *testing.T, in []byte) {
	t.Helper()
	got, err := ParseHeaders(in)
	want, wantErr := parseHeadersTokens(in)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("ParseHeaders(%q) error = %v, token stream error = %v", in, err, wantErr)
	}
	if len(want) == 0 {
		want = nil // an empty object gives nil
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseHeaders(%q)\n got %q\nwant %q", in, got, want)
	}
}

// BenchmarkParseHeaders reads the headers of a typical row: two string
// values, the path every row with headers takes.
func BenchmarkParseHeaders(b *testing.B) {
	v := []byte(`{"trace-id": "4bf92f3577b34da6", "content-type": "application/json"}`)
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		if hs, err := ParseHeaders(v); err != nil || len(hs) != 2 {
			b.Fatal(hs, err)
		}
	}
}

// TestParseHeadersValues: numbers and booleans become their JSON text, a
// null leaves the header out, and an object or array is refused with a
// *HeaderValueError that names the key.
func TestParseHeadersValues(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Header
		wantErr string
	}{
		{name: "strings", in: `{"a": "1", "b": "x"}`, want: []Header{{"a", "1"}, {"b", "x"}}},
		{name: "number", in: `{"retries": 3}`, want: []Header{{"retries", "3"}}},
		{name: "number as written", in: `{"n": -2.50e+3}`, want: []Header{{"n", "-2.50e+3"}}},
		{name: "booleans", in: `{"t": true, "f": false}`, want: []Header{{"t", "true"}, {"f", "false"}}},
		{name: "null left out", in: `{"a": null, "b": "x"}`, want: []Header{{"b", "x"}}},
		{name: "only nulls", in: `{"a": null}`, want: nil},
		{name: "nested object", in: `{"a": "x", "ctx": {"b": "c"}}`, wantErr: `has header "ctx" whose value is a JSON object`},
		{name: "array", in: `{"tags": ["x"]}`, wantErr: `has header "tags" whose value is a JSON array`},
		{name: "not an object", in: `[]`, wantErr: "is a JSON array, want an object of header values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHeaders([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseHeaders(%s) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				var hv *HeaderValueError
				if strings.Contains(tt.wantErr, "has header") && !errors.As(err, &hv) {
					t.Fatalf("error %T, want a *HeaderValueError", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseHeaders(%s) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// BenchmarkParseHeadersMixed reads headers with a number, a boolean and a
// null beside the strings.
func BenchmarkParseHeadersMixed(b *testing.B) {
	v := []byte(`{"trace-id": "4bf92f3577b34da6", "retries": 3, "redelivered": false, "tenant": null}`)
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		if hs, err := ParseHeaders(v); err != nil || len(hs) != 3 {
			b.Fatal(hs, err)
		}
	}
}
