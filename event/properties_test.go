package event

import (
	"reflect"
	"strings"
	"testing"
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
