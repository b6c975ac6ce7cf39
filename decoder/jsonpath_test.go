package decoder

import (
	"bytes"
	"encoding/json"
	"testing"
)

// lookupOracle follows keys with encoding/json: the value of the last of
// a repeated key, as PostgreSQL's -> takes it.
func lookupOracle(doc []byte, keys []string) ([]byte, bool) {
	v := json.RawMessage(doc)
	for _, k := range keys {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(v, &obj); err != nil {
			return nil, false
		}
		var ok bool
		if v, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return bytes.TrimSpace(v), true
}

var jsonPathSamples = []string{
	`{"Value": {"a": 1}, "Headers": {"k": "v"}}`,
	` { "Value" : "x" } `,
	`{"Value": 1, "Value": 2}`,
	`{"a": {"b": {"c": [1, "}", {"d": "]"}]}}}`,
	`{"k\"1": "x", "Value": "caf\u00e9", "a\\b": {}}`,
	`{"Val\u0075e": true}`,
	`{"a": [], "b": null, "c": -1.5e3}`,
	`[{"Value": 1}]`,
	`"Value"`,
	`{}`,
	`{"a": {"Value": {"b": 1}}}`,
	"{\"\xff\": 1, \"Value\": \"\xfe\"}",
	`not json`,
	``,
}

var jsonPathKeys = [][]string{{"Value"}, {"Headers"}, {"a", "b"}, {"a", "b", "c"}, {`k"1`}, {`a\b`}, {"c"}, {"a", "Value", "b"}, {""}}

func FuzzJSONPath(f *testing.F) {
	for _, s := range jsonPathSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, keys := range jsonPathKeys {
			checkLookup(t, doc, keys)
		}
	})
}

func TestJSONPathLookup(t *testing.T) {
	for _, s := range jsonPathSamples {
		for _, keys := range jsonPathKeys {
			checkLookup(t, []byte(s), keys)
		}
	}
}

// checkLookup holds lookup to the oracle: the same value, or an error
// where the oracle finds none. Invalid UTF-8 in a key is where the two
// part: encoding/json replaces it, lookup compares it as it is (as
// PostgreSQL's json would); only documents without it are compared.
func checkLookup(t *testing.T, doc []byte, keys []string) {
	t.Helper()
	p := jsonPath(keys...)
	got, err := p.lookup(doc)
	want, ok := lookupOracle(doc, keys)
	if !json.Valid(doc) || !validUTF8Keys(doc) {
		return
	}
	if (err == nil) != ok {
		t.Fatalf("lookup(%q, %s) = %q, %v; oracle found %v", doc, p, got, err, ok)
	}
	if ok && !bytes.Equal(got, want) {
		t.Fatalf("lookup(%q, %s) = %q, want %q", doc, p, got, want)
	}
}

// validUTF8Keys reports whether doc is valid UTF-8 throughout.
func validUTF8Keys(doc []byte) bool { return bytes.Equal(doc, bytes.ToValidUTF8(doc, nil)) }
