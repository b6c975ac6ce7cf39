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
		{name: "default", text: defaultTemplate, wantFilter: "outbox.*.>",
			wantColumns: []string{"aggregate_type", "event_type"}},
		{name: "one token per placeholder", text: "outbox.{aggregate_type}.{event_type}", wantFilter: "outbox.*.*",
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

		{name: "transforms", text: "outbox.{TypeName|first(,)|last(.)}.{MessageType|last(:)|lower|safe}", wantFilter: "outbox.*.*",
			wantColumns: []string{"TypeName", "MessageType"}},
		{name: "separator of several characters", text: "o.{a|last(::)}.{b|first(, )}", wantFilter: "o.*.*",
			wantColumns: []string{"a", "b"}},
		{name: "tokens alone", text: "cap.{Name|tokens}", wantFilter: "cap.>", wantColumns: []string{"Name"}},
		{name: "tokens after transforms", text: "o.{a}.{b|lower|tokens}", wantFilter: "o.*.>", wantColumns: []string{"a", "b"}},
		{name: "tokens inside the last token", text: "o.v1-{a}{b|tokens}", wantFilter: "o.>", wantColumns: []string{"a", "b"}},
		{name: "tokens as the whole template", text: "{subject|tokens}", wantFilter: ">", wantColumns: []string{"subject"}},

		{name: "empty", text: "", wantErr: "empty"},
		{name: "unknown transform", text: "o.{a|upper}", wantErr: `subject template "o.{a|upper}": placeholder {a|upper}: unknown transform "upper"; the transforms are last(SEP), first(SEP), safe, lower and tokens`},
		{name: "transform names are lower case", text: "o.{a|Safe}", wantErr: `unknown transform "Safe"`},
		{name: "empty transform", text: "o.{a|}", wantErr: "placeholder {a|}: empty transform"},
		{name: "two pipes", text: "o.{a||safe}", wantErr: "empty transform"},
		{name: "last without separator", text: "o.{a|last}", wantErr: `transform "last" needs a separator: last(SEP)`},
		{name: "first without separator", text: "o.{a|first}", wantErr: `transform "first" needs a separator: first(SEP)`},
		{name: "empty separator", text: "o.{a|last()}", wantErr: `transform "last()" has an empty separator`},
		{name: "unclosed parenthesis", text: "o.{a|last(.}", wantErr: `transform "last(.": bad parentheses`},
		{name: "text after parenthesis", text: "o.{a|first(,)x}", wantErr: "bad parentheses"},
		{name: "parenthesis in separator", text: "o.{a|last(()}", wantErr: "bad parentheses"},
		{name: "closing parenthesis as separator", text: "o.{a|last())}", wantErr: "bad parentheses"},
		{name: "argument to safe", text: "o.{a|safe(.)}", wantErr: `transform "safe(.)" takes no argument`},
		{name: "argument to tokens", text: "o.{a|tokens(.)}", wantErr: `transform "tokens(.)" takes no argument`},
		{name: "space before transform", text: "o.{a| safe}", wantErr: `unknown transform " safe"`},
		{name: "transform without column", text: "o.{|safe}", wantErr: "bad placeholder {|safe}"},
		{name: "tokens not last transform", text: "o.{a|tokens|lower}", wantErr: "placeholder {a|tokens|lower}: tokens must be the last transform"},
		{name: "tokens before a literal", text: "o.{a|tokens}.x", wantErr: "placeholder {a|tokens}: tokens is allowed only on the placeholder that ends the template"},
		{name: "tokens before a placeholder", text: "o.{a|tokens}.{b}", wantErr: "tokens is allowed only on the placeholder that ends the template"},
		{name: "tokens before a placeholder in its token", text: "o.{a|tokens}{b}", wantErr: "tokens is allowed only"},
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
		wantFix string // another substring of the error
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
			wantCol: "aggregate_type", wantErr: `value "order.line" is not a valid subject token: it contains '.'`,
			wantFix: "fix: a transform in the subject template: {aggregate_type|last(.)} keeps the part after the last dot, {aggregate_type|safe} turns the dots into '_'"},
		{name: "value with dot in the last placeholder", text: "o.{a}", cols: columns{"a": "x.y"},
			wantCol: "a", wantErr: "it contains '.'", wantFix: "{a|tokens} publishes each part as a subject token"},
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

		// Transforms, with the examples of docs/messages.md.
		{name: ".NET assembly-qualified type name", text: "outbox.{TypeName|first(,)|last(.)}",
			cols: columns{"TypeName": "MyApp.Events.OrderPaid, MyApp"}, want: "outbox.OrderPaid"},
		{name: "MassTransit message URN", text: "mt.{MessageType|last(:)}",
			cols: columns{"MessageType": "urn:message:Shop.Contracts:OrderSubmitted"}, want: "mt.OrderSubmitted"},
		{name: "CAP dotted name", text: "cap.{Name|tokens}", cols: columns{"Name": "shop.order.paid"}, want: "cap.shop.order.paid"},
		{name: "safe", text: "o.{TypeName|safe}", cols: columns{"TypeName": "A.B C"}, want: "o.A_B_C"},
		{name: "safe replaces every unsafe byte", text: "o.{a|safe}", cols: columns{"a": "a*b>c\td\x00e\x7ff.g h\r\n"},
			want: "o.a_b_c_d_e_f_g_h__"},
		{name: "safe keeps UTF-8", text: "o.{a|safe}", cols: columns{"a": "été.prévu"}, want: "o.été_prévu"},
		{name: "safe of a token is the token", text: "o.{a|safe}", cols: columns{"a": "OrderPaid"}, want: "o.OrderPaid"},
		{name: "lower", text: "o.{a|lower}", cols: columns{"a": "OrderPaid"}, want: "o.orderpaid"},
		{name: "lower of UTF-8", text: "o.{a|lower}", cols: columns{"a": "ÉTÉ"}, want: "o.été"},
		{name: "last without the separator", text: "o.{a|last(.)}", cols: columns{"a": "Plain"}, want: "o.Plain"},
		{name: "first without the separator", text: "o.{a|first(,)}", cols: columns{"a": "Plain"}, want: "o.Plain"},
		{name: "separator of two characters", text: "o.{a|first(::)}.{a|last(::)}", cols: columns{"a": "x::y:z::w"}, want: "o.x.w"},
		{name: "separator with a space", text: "o.{a|first(, )}", cols: columns{"a": "Type, Asm"}, want: "o.Type"},
		{name: "left to right", text: "o.{a|last(.)|first(,)}", cols: columns{"a": "A.B, C.D"}, want: "o.D"},
		{name: "left to right, other order", text: "o.{a|first(,)|last(.)}", cols: columns{"a": "A.B, C.D"}, want: "o.B"},
		{name: "default with a dotted event type", text: defaultTemplate,
			cols: columns{"aggregate_type": "order", "event_type": "order.created"}, want: "outbox.order.order.created"},
		{name: "default with a plain event type", text: defaultTemplate,
			cols: columns{"aggregate_type": "order", "event_type": "OrderCreated"}, want: "outbox.order.OrderCreated"},
		{name: "tokens after a prefix in the token", text: "o.v1-{a|tokens}", cols: columns{"a": "x.y"}, want: "o.v1-x.y"},

		{name: "tokens: two dots", text: defaultTemplate, cols: columns{"aggregate_type": "order", "event_type": "a..b"},
			wantCol: "event_type", wantErr: `value "a..b" is not a valid subject token: it has an empty part between dots`,
			wantFix: "fix: a transform in the subject template: {event_type|safe} turns the dots into '_'"},
		{name: "tokens: leading dot", text: defaultTemplate, cols: columns{"aggregate_type": "order", "event_type": ".a"},
			wantCol: "event_type", wantErr: "empty part between dots"},
		{name: "tokens: trailing dot", text: defaultTemplate, cols: columns{"aggregate_type": "order", "event_type": "a."},
			wantCol: "event_type", wantErr: "empty part between dots"},
		{name: "tokens: only a dot", text: defaultTemplate, cols: columns{"aggregate_type": "order", "event_type": "."},
			wantCol: "event_type", wantErr: "empty part between dots"},
		{name: "tokens: space", text: defaultTemplate, cols: columns{"aggregate_type": "order", "event_type": "order.was created"},
			wantCol: "event_type", wantErr: "it contains whitespace or a control character",
			wantFix: "{event_type|safe} turns it (and the dots) into '_'"},
		{name: "tokens: wildcard", text: defaultTemplate, cols: columns{"aggregate_type": "order", "event_type": "order.*"},
			wantCol: "event_type", wantErr: "wildcard '*'"},
		{name: "tokens: gt", text: defaultTemplate, cols: columns{"aggregate_type": "order", "event_type": ">"},
			wantCol: "event_type", wantErr: "wildcard '>'"},
		{name: "tokens: empty", text: defaultTemplate, cols: columns{"aggregate_type": "order", "event_type": ""},
			wantCol: "event_type", wantErr: `value "" is empty`},
		{name: "tokens: NULL", text: defaultTemplate, cols: columns{"aggregate_type": "order"},
			wantCol: "event_type", wantErr: "the column is NULL or missing"},
		{name: "still invalid after transforms", text: "outbox.{TypeName|last(.)}", cols: columns{"TypeName": "MyApp.Events.OrderPaid, MyApp"},
			wantCol: "TypeName", wantErr: `value "MyApp.Events.OrderPaid, MyApp" ("OrderPaid, MyApp" after {TypeName|last(.)}) is not a valid subject token: it contains whitespace`,
			wantFix: "{TypeName|last(.)|safe} turns it into '_'"},
		{name: "empty after transforms", text: "o.{a|last(.)}", cols: columns{"a": "x."},
			wantCol: "a", wantErr: `value "x." ("" after {a|last(.)}) is empty`, wantFix: "change the transforms"},
		{name: "safe cannot fill an empty value", text: "o.{a|safe}", cols: columns{"a": ""},
			wantCol: "a", wantErr: `value "" ("" after {a|safe}) is empty`},
		{name: "lower keeps a dot", text: "o.{a|lower}.x", cols: columns{"a": "A.B"},
			wantCol: "a", wantErr: `("a.b" after {a|lower}) is not a valid subject token: it contains '.'`,
			wantFix: "{a|lower|last(.)} keeps the part after the last dot, {a|lower|safe} turns the dots into '_'"},
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
			if !strings.Contains(err.Error(), tt.wantFix) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantFix)
			}
			// |tokens is allowed only on the placeholder that ends the template.
			if tokens := "{" + tt.wantCol + "|tokens}"; strings.Contains(err.Error(), tokens) && !strings.HasSuffix(text, "{"+tt.wantCol+"}") {
				t.Errorf("error = %q suggests %s, which template %q cannot take", err, tokens, text)
			}
		})
	}
}

// TestRenderMatchesFilter checks that every subject a template renders is
// captured by its own Filter and StreamSubject.
func TestRenderMatchesFilter(t *testing.T) {
	cols := columns{"a": "x", "b": "y-z", "c": "é", "d": "p.q.r", "e": "A.B, C", "aggregate_type": "order", "event_type": "order.created"}
	for _, text := range []string{"outbox.{a}.{b}", "outbox.pre{a}post.{b}", "o.{a}{b}.lit.{c}", "outbox.fixed", "o.{a}",
		defaultTemplate, "o.{a}.{d|tokens}", "o.{d|tokens}", "o.v-{d|tokens}", "o.{a}{d|tokens}", "o.{d|last(.)}.{e|first(,)|safe}"} {
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
		{name: "default", text: defaultTemplate, want: "outbox.>"},
		{name: "prefix then tokens", text: "cap.{Name|tokens}", want: "cap.>"},
		{name: "prefix then tokens inside a token", text: "cap.v-{Name|tokens}", want: "cap.>"},
		{name: "transforms", text: "net.{TypeName|first(,)|last(.)}", want: "net.>"},
		{name: "tokens only", text: "{subject|tokens}", wantErr: true},
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

// TestRenderAsWritten: a dead letter's Outbox-Original-Subject is the
// subject after the transforms, even when NATS would refuse it.
func TestRenderAsWritten(t *testing.T) {
	tmpl := testTemplate(t, "outbox.{TypeName|first(,)|last(.)}.{event_type|tokens}")
	got, ok := tmpl.renderAsWritten(columns{"TypeName": "MyApp.Events.Order Paid, MyApp", "event_type": "a..b"})
	if want := "outbox.Order Paid.a..b"; !ok || got != want {
		t.Errorf("renderAsWritten = %q, %v; want %q", got, ok, want)
	}
	if got, ok := tmpl.renderAsWritten(columns{"TypeName": "x"}); ok {
		t.Errorf("renderAsWritten with a NULL column = %q, want not ok", got)
	}
}

// FuzzRender: whatever the values, a subject Render returns is a valid
// NATS subject (no empty token, wildcard or whitespace) that the template's
// Filter covers, and safe leaves no value that checkToken refuses but
// for an empty one.
func FuzzRender(f *testing.F) {
	f.Add("order", "order.created")
	f.Add("MyApp.Events.OrderPaid, MyApp", "urn:message:Shop.Contracts:OrderSubmitted")
	f.Add("a..b", ".x.")
	f.Add("*", "> \t\x00\x7f")
	f.Add("", "")
	templates := []*Template{
		testTemplate(f, defaultTemplate),
		testTemplate(f, "outbox.{aggregate_type}.{event_type}"),
		testTemplate(f, "net.{aggregate_type|first(,)|last(.)}.{event_type|last(:)|lower}"),
		testTemplate(f, "s.{aggregate_type|safe}.{event_type|safe|tokens}"),
		testTemplate(f, "v.x{aggregate_type|last(..)}{event_type|first(.)|tokens}"),
	}
	f.Fuzz(func(t *testing.T, a, e string) {
		cols := columns{"aggregate_type": a, "event_type": e}
		for _, tmpl := range templates {
			subject, err := tmpl.Render(cols)
			if err != nil {
				var perr *PlaceholderError
				if !errors.As(err, &perr) {
					t.Fatalf("%s: Render error %v is no *PlaceholderError", tmpl, err)
				}
				continue
			}
			if err := validSubject(subject); err != nil || strings.ContainsAny(subject, "*> \t\r\n\x00\x7f") {
				t.Fatalf("%s: Render = %q, not a valid subject", tmpl, subject)
			}
			if !subjectCovers(tmpl.Filter(), subject) {
				t.Fatalf("%s: Filter %q does not cover %q", tmpl, tmpl.Filter(), subject)
			}
		}
		for _, v := range []string{a, e} {
			if problem, c := checkToken(safeToken(v)); problem != valueOK && v != "" {
				t.Fatalf("safeToken(%q) = %q, which checkToken refuses (%d, %q)", v, safeToken(v), problem, c)
			}
		}
	})
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

// BenchmarkTemplateRender renders the subject of a decoded event, as the
// publisher does for every event.
func BenchmarkTemplateRender(b *testing.B) {
	ev := newEventBuilder(b).event(testRow{ID: eventID(1), AggregateType: "order", AggregateID: "42",
		EventType: "order.created", Payload: []byte("{}"), Tenant: strp("MyApp.Events.OrderPaid, MyApp")})
	for _, tt := range []struct{ name, text string }{
		{"placeholders", "outbox.{aggregate_type}.{aggregate_id}"},
		{"literal", "outbox.events"},
		{"default", defaultTemplate},
		{"transforms", "outbox.{aggregate_type}.{tenant|first(,)|last(.)|lower}"},
		{"safe", "outbox.{aggregate_type}.{tenant|safe}"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			tmpl := testTemplate(b, tt.text)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tmpl.Render(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
