package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ParseHeaders reads a headers value: a JSON object, keeping the order of
// the keys as sent (jsonb sends them sorted by length, then bytes; json and
// text send them as written, duplicates included). A string value is the
// header's value; a number or boolean becomes its JSON text (3, 2.5e3,
// true); a null value leaves the header out; an object or array value is a
// *HeaderValueError, since a header holds one line of text and flattening
// it would be a guess. An empty object gives nil.
//
// It is the hot path for rows with headers, so instead of encoding/json's
// token stream (some 35 allocations for two headers) it checks the text with
// json.Valid and then walks the now well-formed object by hand: two
// allocations, the []Header and one copy of the text that keys and values
// slice. Strings with escapes or invalid UTF-8 go through json.Unmarshal, so
// every value is exactly what encoding/json would return; a test holds it to
// the token-stream version.
func ParseHeaders(v []byte) ([]Header, error) {
	if !json.Valid(v) {
		return nil, errors.New("is not valid JSON: write the headers as a JSON object, e.g. {\"Trace-Id\": \"abc\"}")
	}
	p := jsonWalker{s: string(v)}
	p.space()
	if c := p.peek(); c != '{' {
		return nil, fmt.Errorf("is a JSON %s, want an object of header values, e.g. {\"Trace-Id\": \"abc\"}", jsonKind(c))
	}
	var hs []Header
	// The first pass checks the values and counts them, the second fills a
	// slice of the right size.
	for pass := range 2 {
		p.i = 0
		p.space()
		p.i++ // '{'
		n := 0
		p.space()
		for p.peek() == '"' {
			key, err := p.str()
			if err != nil {
				return nil, err
			}
			p.space()
			p.i++ // ':'
			p.space()
			var val string
			omit := false
			switch c := p.peek(); c {
			case '"':
				if val, err = p.str(); err != nil {
					return nil, err
				}
			case '{', '[':
				return nil, &HeaderValueError{Key: key, Kind: jsonKind(c)}
			case 'n':
				p.i += len("null")
				omit = true
			default:
				val = p.literal()
			}
			if !omit {
				if pass == 1 {
					hs[n] = Header{Key: key, Value: val}
				}
				n++
			}
			p.space()
			if p.peek() == ',' {
				p.i++
				p.space()
			}
		}
		if p.peek() != '}' {
			// json.Valid accepted the text, so this is a walker bug.
			return nil, fmt.Errorf("could not be read as a JSON object at byte %d", p.i)
		}
		if n == 0 {
			return nil, nil
		}
		if pass == 0 {
			hs = make([]Header, n)
		}
	}
	return hs, nil
}

// jsonWalker walks JSON text that json.Valid accepted. It still checks
// bounds, so a mistake here returns an error instead of panicking.
type jsonWalker struct {
	s string
	i int
}

func (p *jsonWalker) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *jsonWalker) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// str reads the string at p.i (on its opening quote).
func (p *jsonWalker) str() (string, error) {
	start := p.i
	escaped := false
	j := start + 1
	for j < len(p.s) && p.s[j] != '"' {
		if p.s[j] == '\\' {
			escaped = true
			j++
		}
		j++
	}
	if j >= len(p.s) {
		return "", fmt.Errorf("could not be read as a JSON object: unterminated string at byte %d", start)
	}
	p.i = j + 1
	inner := p.s[start+1 : j]
	if !escaped && utf8.ValidString(inner) {
		return inner, nil
	}
	var out string
	if err := json.Unmarshal([]byte(p.s[start:j+1]), &out); err != nil {
		return "", fmt.Errorf("could not be read as a JSON object: %v", err)
	}
	return out, nil
}

// literal reads the number, true or false at p.i: it ends where the
// object goes on.
func (p *jsonWalker) literal() string {
	start := p.i
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ',', '}', ' ', '\t', '\n', '\r':
			return p.s[start:p.i]
		}
		p.i++
	}
	return p.s[start:p.i]
}

// HeaderValueError reports a header whose value is a JSON object or array.
type HeaderValueError struct {
	// Key is the header's key.
	Key string
	// Kind is the value's JSON type: "object" or "array".
	Kind string
}

// Error names the key and what a header value may be.
func (e *HeaderValueError) Error() string {
	return fmt.Sprintf("has header %q whose value is a JSON %s: a header value must be a string, a number, a boolean or null", e.Key, e.Kind)
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

// CheckHeader reports why a message could not carry the header key: value,
// or returns nil. The error reads "header "k" ...", naming the key and the
// rule. Producers (package outbox) check with it before writing an event.
func CheckHeader(key, value string) error {
	// The client refuses to send a message with such a key, and would
	// refuse every republish of it too.
	if !validHeaderKey(key) {
		return fmt.Errorf("header %q, which is not a valid NATS header name: use printable ASCII without spaces or any of %s", key, headerKeyForbidden)
	}
	// A CR or LF would end the header line and smuggle in another header;
	// other control characters have no place there either.
	if i := strings.IndexFunc(value, isControl); i >= 0 {
		return fmt.Errorf("header %q whose value holds the control character %q at byte %d: header values must be printable", key, value[i], i)
	}
	return nil
}

// headerKeyForbidden are the printable ASCII characters the NATS client
// refuses in a header name (nats.ErrBadHeaderMsg).
const headerKeyForbidden = `"()/,:;<=>?@[\]{}`

// validHeaderKey reports whether the NATS client accepts k as a header
// name: non-empty, printable ASCII other than headerKeyForbidden.
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < '!' || c > '~' || strings.IndexByte(headerKeyForbidden, c) >= 0 {
			return false
		}
	}
	return true
}

// isControl reports ASCII control characters other than tab.
func isControl(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }
