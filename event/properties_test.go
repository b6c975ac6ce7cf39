package event

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []Header
	}{
		{"Debezium's tracingspancontext",
			"#Thu Mar 14 08:26:53 UTC 2024\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n",
			[]Header{{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}},
		{"empty", "", nil},
		{"only a comment", "#Thu Mar 14 08:26:53 UTC 2024\n", nil},
		{"bang comment, blank lines, CRLF", "! note\r\n\r\n  a=1\r\nb = 2\r\n", []Header{{"a", "1"}, {"b", "2"}}},
		{"colon and white space separators", "a:1\nb 2\nc\t:\t3\n", []Header{{"a", "1"}, {"b", "2"}, {"c", "3"}}},
		{"key without value", "flag\n", []Header{{"flag", ""}}},
		{"escaped separators in key and value", `a\:b=c\=d\:e`, []Header{{"a:b", "c=d:e"}}},
		{"escapes", `k=tab\tnl\nu\u00FCx\qq`, []Header{{"k", "tab\tnl\nu\u00fcxqq"}}},
		{"a surrogate pair is one character", `k=\uD83D\uDE00!`, []Header{{"k", "\U0001F600!"}}},
		{"a lone surrogate", `k=\uD83Dx`, []Header{{"k", "\uFFFDx"}}},
		{"continuation", "k=one,\\\n    two\nnext=3", []Header{{"k", "one,two"}, {"next", "3"}}},
		{"even backslashes do not continue", "k=a\\\\\nnext=3", []Header{{"k", `a\`}, {"next", "3"}}},
		{"continuation at the end", "k=a\\", []Header{{"k", "a"}}},
		{"repeated key keeps the last value in its new place", "a=1\nb=2\na=3", []Header{{"b", "2"}, {"a", "3"}}},
		{"tracestate with commas and equals", "traceparent=00-ab-cd-01\ntracestate=congo\\=t61rcWkgMzE,rojo\\=00f067aa0ba902b7",
			[]Header{{"traceparent", "00-ab-cd-01"}, {"tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProperties([]byte(tt.text))
			if err != nil {
				t.Fatalf("ParseProperties(%q): %v", tt.text, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseProperties(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestParsePropertiesBadInput(t *testing.T) {
	tests := []struct {
		text, want string
	}{
		{"a=1\nk=\\u00G1", `line 2: malformed \u escape "\\u00G1"`},
		{"# c\n\nk=\\u12", `line 3: malformed \u escape "\\u12"`},
	}
	for _, tt := range tests {
		_, err := ParseProperties([]byte(tt.text))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "properties format") {
			t.Errorf("ParseProperties(%q) error = %v, want one naming %q", tt.text, err, tt.want)
		}
	}
}

// FuzzParseProperties: ParseProperties never panics, keeps each key once,
// and what it reads from UTF-8 text, written back the way
// Properties.store writes it, reads back the same.
func FuzzParseProperties(f *testing.F) {
	for _, seed := range []string{
		"#Thu Mar 14 08:26:53 UTC 2024\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n",
		"a:1\nb 2\r\nc\\\n  d=3\n! x\n", `k\:1=v\=2\u00e9\t`, "k=\\u12", "=\n:\n \\\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		hs, err := ParseProperties(text)
		if err != nil || !utf8.Valid(text) { // a text column is UTF-8
			return
		}
		keys := map[string]bool{}
		for _, h := range hs {
			if keys[h.Key] {
				t.Fatalf("%q: key %q twice in %q", text, h.Key, hs)
			}
			keys[h.Key] = true
		}
		var stored strings.Builder
		stored.WriteString("#a comment\n")
		for _, h := range hs {
			stored.WriteString(storeProperty(h.Key, true) + "=" + storeProperty(h.Value, false) + "\n")
		}
		again, err := ParseProperties([]byte(stored.String()))
		if err != nil || !reflect.DeepEqual(again, hs) {
			t.Fatalf("%q read as %q; stored as %q it reads as %q (%v)", text, hs, stored.String(), again, err)
		}
	})
}

// storeProperty escapes a key or value as java.util.Properties.store does.
func storeProperty(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\' || r == '=' || r == ':' || r == '#' || r == '!':
			b.WriteString(`\` + string(r))
		case r == ' ' && (key || i == 0):
			b.WriteString(`\ `)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || r > 0x7e:
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04X\u%04X`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04X`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
