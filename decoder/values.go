package decoder

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// The errors of the value parsers are phrased to follow "column "x"" in a
// RowError.

// decodeBytea decodes PostgreSQL's hex output format (\x0a1b...). It returns
// a new slice: decoding in place would change the message that
// Event.Column reads.
func decodeBytea(v []byte) ([]byte, error) {
	if len(v) < 2 || v[0] != '\\' || v[1] != 'x' {
		return nil, errors.New(`is not in bytea hex format (\x...): set bytea_output to 'hex' for outboxd's role`)
	}
	src := v[2:]
	out := make([]byte, hex.DecodedLen(len(src)))
	if _, err := hex.Decode(out, src); err != nil {
		return nil, fmt.Errorf("is not valid bytea hex: %v", err)
	}
	return out, nil
}

// parseHeaders reads a JSON object whose values are all strings, keeping the
// order of the keys as sent (jsonb sends them sorted by length, then bytes;
// json sends them as written, duplicates included). An empty object gives
// nil.
//
// It is the hot path for rows with headers, so instead of encoding/json's
// token stream (some 35 allocations for two headers) it checks the text with
// json.Valid and then walks the now well-formed object by hand: two
// allocations, the []Header and one copy of the text that keys and values
// slice. Strings with escapes or invalid UTF-8 go through json.Unmarshal, so
// every value is exactly what encoding/json would return; a test holds it to
// the token-stream version.
func parseHeaders(v []byte) ([]Header, error) {
	if !json.Valid(v) {
		return nil, errors.New("is not valid JSON")
	}
	p := jsonWalker{s: string(v)}
	p.space()
	if c := p.peek(); c != '{' {
		return nil, fmt.Errorf("is a JSON %s, want an object of strings", jsonKind(c))
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
			if c := p.peek(); c != '"' {
				return nil, fmt.Errorf("has header %q whose value is a JSON %s, want a string", key, jsonKind(c))
			}
			val, err := p.str()
			if err != nil {
				return nil, err
			}
			if pass == 1 {
				hs[n] = Header{Key: key, Value: val}
			}
			n++
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

// parseTimestamp reads timestamptz or timestamp text output in the ISO
// DateStyle: "2026-12-02 15:39:55.123456+00", with the fraction optional,
// an offset of ±HH, ±HH:MM or ±HH:MM:SS (historic zones), and " BC" for
// years before 1. A value without offset (timestamp) is taken as UTC. The
// result is in UTC: building a FixedZone per row would cost an allocation,
// and the instant is what matters.
func parseTimestamp(v []byte) (time.Time, error) {
	if string(v) == "infinity" || string(v) == "-infinity" {
		return time.Time{}, fmt.Errorf("is %s, want a finite timestamp", v)
	}
	t, ok := parseISO(v)
	if !ok {
		return time.Time{}, fmt.Errorf("is %s, not an ISO timestamp: outboxd needs DateStyle ISO on its replication connection", strconv.Quote(string(v)))
	}
	return t, nil
}

func parseISO(v []byte) (time.Time, bool) {
	p := tsParser{b: v}
	year := p.num(4, 7)
	p.lit('-')
	month := p.num(2, 2)
	p.lit('-')
	day := p.num(2, 2)
	if p.peek(' ') || p.peek('T') {
		p.i++
	} else {
		p.bad = true
	}
	hour := p.num(2, 2)
	p.lit(':')
	minute := p.num(2, 2)
	p.lit(':')
	sec := p.num(2, 2)
	nsec := 0
	if p.peek('.') {
		p.i++
		start := p.i
		frac := p.num(1, 9)
		for range 9 - (p.i - start) {
			frac *= 10
		}
		nsec = frac
	}
	offset := 0
	if p.peek('+') || p.peek('-') {
		sign := 1
		if p.b[p.i] == '-' {
			sign = -1
		}
		p.i++
		offset = p.num(2, 2) * 3600
		if p.peek(':') {
			p.i++
			offset += p.num(2, 2) * 60
			if p.peek(':') {
				p.i++
				offset += p.num(2, 2)
			}
		}
		offset *= sign
	}
	if !p.bad && string(p.b[p.i:]) == " BC" {
		p.i = len(p.b)
		year = 1 - year // 1 BC is ISO year 0
	}
	if p.bad || p.i != len(p.b) ||
		month < 1 || month > 12 || day < 1 || day > 31 ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // February 30 and friends: time.Date normalises them
		return time.Time{}, false
	}
	return t.Add(-time.Duration(offset) * time.Second), true
}

// tsParser is a cursor over a timestamp; after the first mismatch bad is set
// and every later step is a no-op.
type tsParser struct {
	b   []byte
	i   int
	bad bool
}

func (p *tsParser) peek(c byte) bool { return !p.bad && p.i < len(p.b) && p.b[p.i] == c }

func (p *tsParser) lit(c byte) {
	if p.peek(c) {
		p.i++
		return
	}
	p.bad = true
}

// num reads min to max decimal digits.
func (p *tsParser) num(min, max int) int {
	if p.bad {
		return 0
	}
	n, start := 0, p.i
	for p.i < len(p.b) && p.i-start < max && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int(p.b[p.i]-'0')
		p.i++
	}
	if p.i-start < min {
		p.bad = true
	}
	return n
}
