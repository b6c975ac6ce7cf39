package event

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
)

// ParseProperties reads a headers value written in the format of Java's
// java.util.Properties (Properties.store, and what Properties.load reads):
// one key=value per line, where '=', ':' or white space ends the key;
// lines starting with '#' or '!' are comments; a line ending in an odd
// number of backslashes continues on the next one; \t \n \r \f \uXXXX and
// \c (c itself) are escapes. Debezium's outbox tables keep a trace context
// so (`tracingspancontext`: "#<date>\ntraceparent=00-…-01\n"), and each key
// becomes a header. Keys keep their order; a repeated key keeps its last
// value, as Properties.load does. Empty text gives nil.
//
// The only error is a malformed \u escape, named by line. Keys and values
// are not checked as headers here: CheckHeader does that where the message
// is built, as for JSON headers.
func ParseProperties(v []byte) ([]Header, error) {
	var hs []Header
	lines := logicalLines(string(v))
	for _, l := range lines {
		key, value, err := propertyPair(l.text)
		if err != nil {
			return nil, fmt.Errorf("is not in properties format: line %d: %w", l.number, err)
		}
		if i := indexHeader(hs, key); i >= 0 {
			hs = append(hs[:i], hs[i+1:]...)
		}
		hs = append(hs, Header{Key: key, Value: value})
	}
	return hs, nil
}

// propertyLine is one logical line (continuations joined) and the number
// of the physical line it starts on.
type propertyLine struct {
	text   string
	number int
}

// logicalLines splits text into the logical lines Properties.load reads:
// comments and blank lines dropped, continuation lines joined without
// their leading white space.
func logicalLines(text string) []propertyLine {
	var out []propertyLine
	var cur strings.Builder
	start, continuing := 0, false
	physical := strings.Split(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(text), "\n")
	for n, line := range physical {
		line = strings.TrimLeft(line, " \t\f")
		if !continuing {
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
			cur.Reset()
			start = n + 1
		}
		trailing := len(line) - len(strings.TrimRight(line, `\`))
		continuing = trailing%2 == 1
		if continuing {
			line = line[:len(line)-1]
		}
		cur.WriteString(line)
		if !continuing {
			out = append(out, propertyLine{text: cur.String(), number: start})
		}
	}
	if continuing {
		out = append(out, propertyLine{text: cur.String(), number: start})
	}
	return out
}

// propertyPair splits a logical line into its unescaped key and value.
func propertyPair(line string) (key, value string, err error) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		if c := line[i]; c == '\\' {
			i++ // an escaped character never ends the key
		} else if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	rest := strings.TrimLeft(line[end:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	if key, err = unescapeProperty(line[:end]); err != nil {
		return "", "", err
	}
	if value, err = unescapeProperty(rest); err != nil {
		return "", "", err
	}
	return key, value, nil
}

// unescapeProperty resolves the backslash escapes of a key or value.
func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, err := hex4(s, i+1)
			if err != nil {
				return "", err
			}
			i += 4
			// Java writes a character beyond U+FFFF as two escapes, a
			// UTF-16 surrogate pair.
			if utf16.IsSurrogate(r) && strings.HasPrefix(s[i+1:], `\u`) {
				if r2, err := hex4(s, i+3); err == nil {
					if pair := utf16.DecodeRune(r, r2); pair != unicode.ReplacementChar {
						r = pair
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// hex4 reads the four hex digits of a \u escape at s[i:].
func hex4(s string, i int) (rune, error) {
	if i+4 > len(s) {
		return 0, fmt.Errorf(`malformed \u escape %q: write \u and four hex digits`, s[i-2:])
	}
	r, err := strconv.ParseUint(s[i:i+4], 16, 16)
	if err != nil {
		return 0, fmt.Errorf(`malformed \u escape %q: write \u and four hex digits`, s[i-2:i+4])
	}
	return rune(r), nil
}

// indexHeader is the index of key in hs, or -1.
func indexHeader(hs []Header, key string) int {
	for i, h := range hs {
		if h.Key == key {
			return i
		}
	}
	return -1
}
