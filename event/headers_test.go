package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
)

// parseHeadersTokens is the plain encoding/json token-stream reading of a
// headers object: the oracle that parseHeaders must agree with.
func parseHeadersTokens(v []byte) ([]Header, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
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
		val, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("value of %q is not a string", key)
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
	`{"a": true}`,
	`{"a": null}`,
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
