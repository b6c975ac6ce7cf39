package sink

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// columns is an EventColumns backed by a map; a missing key is NULL.
type columns map[string]string

func (c columns) Column(name string) (string, bool) {
	v, ok := c[name]
	return v, ok
}

func TestParseTemplate(t *testing.T) {
	tests := []struct {
		name        string
		text        string
		wantFilter  string
		wantColumns []string
		wantErr     string // substring; "" means no error
	}{
		{name: "default", text: "outbox.{aggregate_type}.{event_type}", wantFilter: "outbox.*.*",
			wantColumns: []string{"aggregate_type", "event_type"}},
		{name: "literal only", text: "outbox.events", wantFilter: "outbox.events"},
		{name: "single token", text: "outbox", wantFilter: "outbox"},
		{name: "leading placeholder", text: "{aggregate_type}.events", wantFilter: "*.events",
			wantColumns: []string{"aggregate_type"}},
		{name: "placeholder only", text: "{tenant}", wantFilter: "*", wantColumns: []string{"tenant"}},
		{name: "placeholder inside a token", text: "outbox.v1-{aggregate_type}.x", wantFilter: "outbox.*.x",
			wantColumns: []string{"aggregate_type"}},
		{name: "two placeholders in one token", text: "outbox.{a}{b}", wantFilter: "outbox.*",
			wantColumns: []string{"a", "b"}},
		{name: "repeated column", text: "o.{a}.{a}", wantFilter: "o.*.*", wantColumns: []string{"a", "a"}},
		{name: "unicode literal", text: "outbox.événements.{a}", wantFilter: "outbox.événements.*",
			wantColumns: []string{"a"}},

		{name: "empty", text: "", wantErr: "empty"},
		{name: "unclosed brace", text: "outbox.{aggregate_type", wantErr: "unclosed '{'"},
		{name: "unclosed second brace", text: "outbox.{a}.{b", wantErr: "unclosed '{'"},
		{name: "empty placeholder", text: "outbox.{}", wantErr: "bad placeholder {}"},
		{name: "placeholder with space", text: "outbox.{aggregate type}", wantErr: "bad placeholder"},
		{name: "nested brace", text: "outbox.{a{b}", wantErr: "bad placeholder"},
		{name: "stray closing brace", text: "outbox.a}", wantErr: "do not allow"},
		{name: "literal with space", text: "outbox events.{a}", wantErr: "do not allow"},
		{name: "literal with tab", text: "outbox\t.{a}", wantErr: "do not allow"},
		{name: "literal with newline", text: "outbox.{a}\n", wantErr: "do not allow"},
		{name: "literal with star", text: "outbox.*.{a}", wantErr: "do not allow"},
		{name: "literal with gt", text: "outbox.{a}.>", wantErr: "do not allow"},
		{name: "two dots", text: "a..b", wantErr: "empty token"},
		{name: "two dots around placeholder", text: "outbox..{a}", wantErr: "empty token"},
		{name: "trailing dot", text: "outbox.{a}.", wantErr: "empty token"},
		{name: "leading dot", text: ".outbox.{a}", wantErr: "empty token"},
		{name: "only a dot", text: ".", wantErr: "empty token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tt.text)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseTemplate(%q) = %v, want error containing %q", tt.text, tmpl.Filter(), tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTemplate(%q) error = %q, want it to contain %q", tt.text, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTemplate(%q): %v", tt.text, err)
			}
			if got := tmpl.String(); got != tt.text {
				t.Errorf("String() = %q, want %q", got, tt.text)
			}
			if got := tmpl.Filter(); got != tt.wantFilter {
				t.Errorf("Filter() = %q, want %q", got, tt.wantFilter)
			}
			if got := tmpl.Columns(); !slices.Equal(got, tt.wantColumns) {
				t.Errorf("Columns() = %q, want %q", got, tt.wantColumns)
			}
		})
	}
}

func TestRender(t *testing.T) {
	const tmplText = "outbox.{aggregate_type}.v1-{event_type}"
	tests := []struct {
		name    string
		text    string // default tmplText
		cols    columns
		want    string
		wantCol string // column of the *PlaceholderError; "" means no error
		wantErr string // substring of the error
	}{
		{name: "plain", cols: columns{"aggregate_type": "order", "event_type": "created"},
			want: "outbox.order.v1-created"},
		{name: "literal only ignores columns", text: "outbox.all", cols: columns{}, want: "outbox.all"},
		{name: "placeholder only", text: "{aggregate_type}", cols: columns{"aggregate_type": "order"}, want: "order"},
		{name: "adjacent placeholders", text: "o.{a}{b}", cols: columns{"a": "x", "b": "y"}, want: "o.xy"},
		{name: "unicode and punctuation", cols: columns{"aggregate_type": "commande_é-1", "event_type": "créée:ok"},
			want: "outbox.commande_é-1.v1-créée:ok"},
		{name: "other columns are ignored", cols: columns{"aggregate_type": "a", "event_type": "b", "x": "a.b"},
			want: "outbox.a.v1-b"},

		{name: "value with dot", cols: columns{"aggregate_type": "order.line", "event_type": "created"},
			wantCol: "aggregate_type", wantErr: `value "order.line" is not a valid subject token: it contains '.'`},
		{name: "value with space", cols: columns{"aggregate_type": "order", "event_type": "was created"},
			wantCol: "event_type", wantErr: "whitespace or a control character"},
		{name: "value with star", cols: columns{"aggregate_type": "*", "event_type": "created"},
			wantCol: "aggregate_type", wantErr: "wildcard '*'"},
		{name: "value with gt", cols: columns{"aggregate_type": "order", "event_type": "a>"},
			wantCol: "event_type", wantErr: "wildcard '>'"},
		{name: "value with tab", cols: columns{"aggregate_type": "a\tb", "event_type": "c"},
			wantCol: "aggregate_type", wantErr: "control character"},
		{name: "value with newline", cols: columns{"aggregate_type": "a", "event_type": "c\r\n"},
			wantCol: "event_type", wantErr: "control character"},
		{name: "value with NUL", cols: columns{"aggregate_type": "a\x00", "event_type": "c"},
			wantCol: "aggregate_type", wantErr: "control character"},
		{name: "value with DEL", cols: columns{"aggregate_type": "a", "event_type": "c\x7f"},
			wantCol: "event_type", wantErr: "control character"},
		{name: "empty value", cols: columns{"aggregate_type": "", "event_type": "created"},
			wantCol: "aggregate_type", wantErr: "is empty"},
		{name: "NULL or missing column", cols: columns{"aggregate_type": "order"},
			wantCol: "event_type", wantErr: "the column is NULL or missing"},
		{name: "first bad placeholder wins", cols: columns{},
			wantCol: "aggregate_type", wantErr: "NULL or missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := tt.text
			if text == "" {
				text = tmplText
			}
			tmpl := testTemplate(t, text)
			got, err := tmpl.Render(tt.cols)
			if tt.wantCol == "" {
				if err != nil {
					t.Fatalf("Render: %v", err)
				}
				if got != tt.want {
					t.Fatalf("Render = %q, want %q", got, tt.want)
				}
				return
			}
			var perr *PlaceholderError
			if !errors.As(err, &perr) {
				t.Fatalf("Render = %q, %v; want a *PlaceholderError", got, err)
			}
			if perr.Column != tt.wantCol {
				t.Errorf("PlaceholderError.Column = %q, want %q", perr.Column, tt.wantCol)
			}
			if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "{"+tt.wantCol+"}") {
				t.Errorf("error = %q, want it to name {%s} and contain %q", err, tt.wantCol, tt.wantErr)
			}
		})
	}
}

// TestRenderMatchesFilter checks that every subject a template renders is
// captured by its own Filter and StreamSubject.
func TestRenderMatchesFilter(t *testing.T) {
	cols := columns{"a": "x", "b": "y-z", "c": "é"}
	for _, text := range []string{"outbox.{a}.{b}", "outbox.pre{a}post.{b}", "o.{a}{b}.lit.{c}", "outbox.fixed", "o.{a}"} {
		tmpl := testTemplate(t, text)
		subject, err := tmpl.Render(cols)
		if err != nil {
			t.Fatal(err)
		}
		if !subjectCovers(tmpl.Filter(), subject) {
			t.Errorf("%q: Filter %q does not match rendered %q", text, tmpl.Filter(), subject)
		}
		ss, err := tmpl.StreamSubject()
		if err != nil {
			t.Fatal(err)
		}
		if !subjectCovers(ss, tmpl.Filter()) {
			t.Errorf("%q: StreamSubject %q does not cover Filter %q", text, ss, tmpl.Filter())
		}
	}
}

func TestStreamSubject(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    string
		wantErr bool
	}{
		{name: "prefix then placeholders", text: "outbox.{aggregate_type}.{event_type}", want: "outbox.>"},
		{name: "longer prefix", text: "acme.outbox.v1.{event_type}", want: "acme.outbox.v1.>"},
		{name: "literal after placeholder", text: "outbox.{a}.created", want: "outbox.>"},
		{name: "placeholder inside token", text: "outbox.x{a}", want: "outbox.>"},
		{name: "no placeholder", text: "outbox.events", want: "outbox.events"},
		{name: "single literal token", text: "outbox", want: "outbox"},
		{name: "leading placeholder", text: "{aggregate_type}.events", wantErr: true},
		{name: "leading placeholder inside token", text: "v{a}.events", wantErr: true},
		{name: "placeholder only", text: "{a}", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := testTemplate(t, tt.text).StreamSubject()
			if tt.wantErr {
				if err == nil {
					t.Fatalf("StreamSubject = %q, want an error", got)
				}
				if !strings.Contains(err.Error(), "starts with a placeholder") || !strings.Contains(err.Error(), tt.text) {
					t.Errorf("error = %q, want it to name the template and say it starts with a placeholder", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("StreamSubject: %v", err)
			}
			if got != tt.want {
				t.Fatalf("StreamSubject = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSubjectCovers(t *testing.T) {
	tests := []struct {
		name   string
		filter string
		sub    string
		want   bool
	}{
		{name: "equal literal", filter: "outbox.order", sub: "outbox.order", want: true},
		{name: "gt covers one token", filter: "outbox.>", sub: "outbox.order", want: true},
		{name: "gt covers many tokens", filter: "outbox.>", sub: "outbox.order.created.v1", want: true},
		{name: "gt covers star", filter: "outbox.>", sub: "outbox.*.*", want: true},
		{name: "gt covers gt", filter: "outbox.>", sub: "outbox.>", want: true},
		{name: "gt alone covers all", filter: ">", sub: "a.b.c", want: true},
		{name: "gt needs a token", filter: "outbox.>", sub: "outbox", want: false},
		{name: "star covers literal", filter: "outbox.*", sub: "outbox.order", want: true},
		{name: "star covers star", filter: "outbox.*.*", sub: "outbox.*.*", want: true},
		{name: "star in the middle", filter: "outbox.*.created", sub: "outbox.order.created", want: true},
		{name: "star does not cover gt", filter: "outbox.*", sub: "outbox.>", want: false},
		{name: "literal does not cover star", filter: "outbox.order", sub: "outbox.*", want: false},
		{name: "literal does not cover gt", filter: "outbox.order", sub: "outbox.>", want: false},
		{name: "literal mismatch", filter: "outbox.order", sub: "outbox.invoice", want: false},
		{name: "prefix mismatch", filter: "events.>", sub: "outbox.order", want: false},
		{name: "prefix mismatch before gt", filter: "outbox.order.>", sub: "outbox.*.created", want: false},
		{name: "filter shorter", filter: "outbox.*", sub: "outbox.order.created", want: false},
		{name: "filter longer", filter: "outbox.*.*", sub: "outbox.order", want: false},
		{name: "longer filter with gt", filter: "outbox.*.>", sub: "outbox.order", want: false},
		{name: "longer filter over gt", filter: "outbox.*.>", sub: "outbox.>", want: false},
		{name: "case matters", filter: "Outbox.>", sub: "outbox.order", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := subjectCovers(tt.filter, tt.sub); got != tt.want {
				t.Fatalf("subjectCovers(%q, %q) = %v, want %v", tt.filter, tt.sub, got, tt.want)
			}
		})
	}
}

// TestRenderEvent renders from a decoded event, so Event.Column is what
// the template reads in production.
func TestRenderEvent(t *testing.T) {
	b := newEventBuilder(t)
	ev := b.event(testRow{ID: eventID(1), AggregateType: "order", AggregateID: "42", EventType: "created",
		Payload: []byte("{}"), Tenant: strp("acme")})
	got, err := testTemplate(t, "outbox.{tenant}.{aggregate_type}.{event_type}").Render(ev)
	if err != nil || got != "outbox.acme.order.created" {
		t.Fatalf("Render = %q, %v; want outbox.acme.order.created", got, err)
	}
	_, err = testTemplate(t, "outbox.{no_such_column}").Render(ev)
	var perr *PlaceholderError
	if !errors.As(err, &perr) || perr.Column != "no_such_column" {
		t.Fatalf("Render with a missing column: %v, want *PlaceholderError for no_such_column", err)
	}
	null := b.event(testRow{ID: eventID(2), AggregateType: "order", AggregateID: "42", EventType: "created",
		Payload: []byte("{}")})
	_, err = testTemplate(t, "outbox.{tenant}").Render(null)
	if !errors.As(err, &perr) || perr.Column != "tenant" || !strings.Contains(perr.Problem, "NULL") {
		t.Fatalf("Render with a NULL column: %v, want *PlaceholderError for tenant saying NULL", err)
	}
}
