package main

import (
	"slices"
	"strings"
	"testing"
)

// TestParseOrderBy: --order-by takes exact column names separated by
// commas, a name in double quotes for one holding a comma or a quote.
func TestParseOrderBy(t *testing.T) {
	for _, tt := range []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "empty: the default order", in: "  "},
		{name: "one", in: "SequenceNumber", want: []string{"SequenceNumber"}},
		{name: "several with spaces", in: "created_at, offset ,id", want: []string{"created_at", "offset", "id"}},
		{name: "quoted", in: `"offset","a,b","say ""hi"""`, want: []string{"offset", "a,b", `say "hi"`}},
		{name: "empty name", in: "offset,,id", wantErr: `--order-by "offset,,id" names an empty column`},
		{name: "trailing comma", in: "offset,", wantErr: "names an empty column"},
		{name: "unterminated quote", in: `"offset`, wantErr: "unterminated quoted column name"},
		{name: "junk after quote", in: `"offset"x`, wantErr: `unexpected 'x' after the quoted name "offset"`},
		{name: "quote inside a name", in: `my"col`, wantErr: `column name "my\"col" holds a quote`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOrderBy(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseOrderBy(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("parseOrderBy(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}
