package decoder

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
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
