package decoder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSONPath is a path of object keys into a JSON value, followed as
// PostgreSQL's -> operator follows keys: in --columns,
// payload=Content->Value reads the key "Value" of the object that column
// Content holds. Keys are matched exactly (case-sensitive); where an object
// has a key twice, the last one counts, as in PostgreSQL. A key is always
// an object key, never an array index. The zero JSONPath is the whole
// value. JSONPath is comparable, so Columns is too.
type JSONPath struct {
	keys string // each key followed by a NUL byte
}

// NewJSONPath returns the path through keys, in order. A key may be
// empty, but may not hold a NUL character (no PostgreSQL JSON value has
// one in a key: jsonb refuses \u0000).
func NewJSONPath(keys ...string) (JSONPath, error) {
	var b strings.Builder
	for _, k := range keys {
		if strings.IndexByte(k, 0) >= 0 {
			return JSONPath{}, fmt.Errorf("JSON path key %q holds a NUL character", k)
		}
		b.WriteString(k)
		b.WriteByte(0)
	}
	return JSONPath{keys: b.String()}, nil
}

// IsZero reports whether p is the whole value (no keys).
func (p JSONPath) IsZero() bool { return p.keys == "" }

// Keys returns the path's keys in order.
func (p JSONPath) Keys() []string {
	if p.keys == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(p.keys, "\x00"), "\x00")
}

// String returns the path in --columns form, "->Value->Inner", with each
// key in double quotes where ParseColumns needs them; "" for the zero path.
func (p JSONPath) String() string {
	var b strings.Builder
	for _, k := range p.Keys() {
		b.WriteString("->")
		b.WriteString(quoteName(k))
	}
	return b.String()
}

// lookup returns the JSON text of the value at p in doc (whitespace
// around it trimmed), aliasing doc. Its errors say why the path leads
// nowhere and follow `column "x"` in a RowError. A row that matches costs
// no allocation: keys are compared in place, and the text of an error is
// only made for a row that does not.
func (p JSONPath) lookup(doc []byte) ([]byte, error) {
	if !json.Valid(doc) {
		return nil, fmt.Errorf("is not valid JSON, so the JSON path %s cannot be read: map the field to the column itself, or make the writer store JSON", p)
	}
	w := jsonText{b: doc}
	w.space()
	start := w.i
	for rest := p.keys; rest != ""; {
		end := strings.IndexByte(rest, 0)
		key := rest[:end]
		// The path followed so far, for errors.
		at := JSONPath{keys: p.keys[:len(p.keys)-len(rest)]}
		rest = rest[end+1:]
		if c := w.b[start]; c != '{' {
			where := "the column holds"
			if !at.IsZero() {
				where = "at " + at.String() + " is"
			}
			return nil, fmt.Errorf("does not match the JSON path %s: %s a JSON %s, not an object, so it has no key %q; fix the path in --columns (keys are case-sensitive)",
				p, where, jsonKind(c), key)
		}
		found := -1
		w.i = start + 1
		w.space()
		for w.peek() == '"' {
			keyStart := w.i
			w.skipString()
			raw := w.b[keyStart:w.i]
			w.space()
			w.i++ // ':'
			w.space()
			if keyIs(raw, key) {
				found = w.i // the last of a repeated key counts
			}
			w.skip()
			w.space()
			if w.peek() == ',' {
				w.i++
				w.space()
			}
		}
		if found < 0 {
			return nil, fmt.Errorf("does not match the JSON path %s: there is no key %q (the object has %s); fix the path in --columns (keys are case-sensitive)",
				p, key, objectKeys(doc, start))
		}
		start = found
	}
	w.i = start
	w.skip()
	return doc[start:w.i], nil
}

// keyIs reports whether the JSON string raw (quotes included) is key.
func keyIs(raw []byte, key string) bool {
	if len(raw) < 2 {
		return false
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == key
	}
	return string(jsonString(raw)) == key
}

// objectKeys names the first keys of the object at doc[start], for an
// error: "keys "a", "b"", or "no keys".
func objectKeys(doc []byte, start int) string {
	const most = 10
	var keys []string
	n := 0
	w := jsonText{b: doc, i: start + 1}
	w.space()
	for w.peek() == '"' {
		k := w.str()
		if n < most {
			keys = append(keys, strconv.Quote(k))
		}
		n++
		w.space()
		w.i++ // ':'
		w.space()
		w.skip()
		w.space()
		if w.peek() == ',' {
			w.i++
			w.space()
		}
	}
	switch {
	case n == 0:
		return "no keys"
	case n > most:
		return "keys " + strings.Join(keys, ", ") + ", …"
	}
	return "keys " + strings.Join(keys, ", ")
}

// jsonString returns the content of a JSON string value (its text starts
// with '"'), unescaped; a string without escapes aliases v.
func jsonString(v []byte) []byte {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return inner // json.Valid accepted it; cannot happen
	}
	return []byte(s)
}

// jsonText walks JSON text that json.Valid accepted. It checks bounds all
// the same, so a mistake here ends a walk early instead of panicking.
type jsonText struct {
	b []byte
	i int
}

func (w *jsonText) peek() byte {
	if w.i < len(w.b) {
		return w.b[w.i]
	}
	return 0
}

func (w *jsonText) space() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// str reads the string at w.i (on its opening quote) and returns its
// content.
func (w *jsonText) str() string {
	start := w.i
	w.skipString()
	raw := w.b[start:w.i]
	if len(raw) < 2 {
		return ""
	}
	return string(jsonString(raw))
}

func (w *jsonText) skipString() {
	w.i++ // '"'
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case '\\':
			w.i += 2
			continue
		case '"':
			w.i++
			return
		}
		w.i++
	}
}

// skip moves past the value at w.i.
func (w *jsonText) skip() {
	switch w.peek() {
	case '"':
		w.skipString()
	case '{', '[':
		depth := 0
		for w.i < len(w.b) {
			switch w.b[w.i] {
			case '"':
				w.skipString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					w.i++
					return
				}
			}
			w.i++
		}
	default: // number, true, false, null
		for w.i < len(w.b) {
			switch w.b[w.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			w.i++
		}
	}
}

// jsonKind names the JSON type of the value that starts with c.
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// errNoPath is returned for a path given to a field that takes none.
var errNoPath = errors.New("a JSON path (->) is supported for payload and headers only: map this field to a column")
