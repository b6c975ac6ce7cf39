package sink

import (
	"fmt"
	"strings"
)

// Template renders a subject from an event's columns: literal text with
// {column} placeholders, e.g. "outbox.{aggregate_type}.{event_type}". A
// placeholder may pass its value through transforms, applied left to
// right: {TypeName|first(,)|last(.)}. See ParseTemplate.
type Template struct {
	text  string
	parts []templatePart
}

type templatePart struct {
	literal string
	column  string // set for a placeholder
	// transforms are applied to the column's value in order; nil for a
	// plain {column}, which renders with no more work than before.
	transforms []transform
	// tokens is set by a trailing |tokens: the value may hold dots and
	// renders as several subject tokens.
	tokens bool
	// canTokens reports whether |tokens would be allowed here (the
	// template's last part), for the fix a *PlaceholderError suggests.
	canTokens bool
}

// transform is one step of a placeholder's pipe.
type transform struct {
	kind transformKind
	sep  string // of last(SEP) and first(SEP)
	text string // as written, e.g. "last(.)"
}

type transformKind uint8

const (
	transformLast transformKind = iota + 1
	transformFirst
	transformSafe
	transformLower
)

// transformSet is the accepted set, as errors name it.
const transformSet = "last(SEP), first(SEP), safe, lower and tokens"

// apply returns v transformed. last and first return part of v without
// copying; safe and lower copy only when they change something.
func (tr transform) apply(v string) string {
	switch tr.kind {
	case transformLast:
		if i := strings.LastIndex(v, tr.sep); i >= 0 {
			return v[i+len(tr.sep):]
		}
	case transformFirst:
		if i := strings.Index(v, tr.sep); i >= 0 {
			return v[:i]
		}
	case transformSafe:
		return safeToken(v)
	case transformLower:
		return strings.ToLower(v)
	}
	return v
}

// EventColumns is the part of an event a template reads.
type EventColumns interface {
	Column(name string) (string, bool)
}

// ParseTemplate parses a subject template. Literal text may not hold
// characters NATS forbids in subjects; a placeholder names a column and
// may add transforms after pipes, applied left to right:
//
//   - last(SEP): the text after the last SEP (all of it without one);
//   - first(SEP): the text before the first SEP (all of it without one);
//   - safe: '.', '*', '>', whitespace and control characters become '_';
//   - lower: lower case;
//   - tokens: the value may hold dots and renders as several subject
//     tokens. Only on the placeholder that ends the template, and only as
//     its last transform: the template's Filter then ends with ">".
//
// SEP is one or more characters other than '|', '(', ')', '{' and '}'.
// An unknown transform, a missing SEP or a misplaced tokens is an error
// naming the template, the placeholder and the accepted set.
func ParseTemplate(text string) (*Template, error) {
	t := &Template{text: text}
	rest := text
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			t.parts = append(t.parts, templatePart{literal: rest})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, templatePart{literal: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("subject template %q: unclosed '{'", text)
		}
		p, err := parsePlaceholder(rest[open+1 : open+end])
		if err != nil {
			return nil, fmt.Errorf("subject template %q: %w", text, err)
		}
		t.parts = append(t.parts, p)
		rest = rest[open+end+1:]
	}
	if len(t.parts) == 0 {
		return nil, fmt.Errorf("subject template is empty: use e.g. outbox.{aggregate_type}.{event_type}")
	}
	for i := range t.parts {
		p := &t.parts[i]
		if strings.ContainsAny(p.literal, " \t\r\n*>}") {
			return nil, fmt.Errorf("subject template %q: literal %q holds a character NATS subjects do not allow (space, *, >, })", text, p.literal)
		}
		p.canTokens = p.column != "" && i == len(t.parts)-1
		if p.tokens && !p.canTokens {
			return nil, fmt.Errorf("subject template %q: placeholder %s: tokens is allowed only on the placeholder that ends the template, as in outbox.{aggregate_type}.{event_type|tokens}, "+
				"since its value may be any number of tokens; use last(SEP) or safe here instead", text, p.placeholder())
		}
	}
	if err := validSubject(t.Filter()); err != nil {
		return nil, fmt.Errorf("subject template %q: %w", text, err)
	}
	return t, nil
}

// parsePlaceholder parses what is between '{' and '}'.
func parsePlaceholder(s string) (templatePart, error) {
	column, pipe, _ := strings.Cut(s, "|")
	if column == "" || strings.ContainsAny(column, "{ ") {
		return templatePart{}, fmt.Errorf("bad placeholder {%s}: use {column_name}, or {column_name|transform} with the transforms %s", s, transformSet)
	}
	p := templatePart{column: column}
	if s == column {
		return p, nil
	}
	for _, text := range strings.Split(pipe, "|") {
		if p.tokens {
			return templatePart{}, fmt.Errorf("placeholder {%s}: tokens must be the last transform, as in {%s|tokens}", s, column)
		}
		if text == "tokens" {
			p.tokens = true
			continue
		}
		tr, err := parseTransform(text)
		if err != nil {
			return templatePart{}, fmt.Errorf("placeholder {%s}: %v; the transforms are %s, e.g. {%s|last(.)}", s, err, transformSet, column)
		}
		p.transforms = append(p.transforms, tr)
	}
	return p, nil
}

// parseTransform parses one transform other than tokens.
func parseTransform(text string) (transform, error) {
	switch text {
	case "safe":
		return transform{kind: transformSafe, text: text}, nil
	case "lower":
		return transform{kind: transformLower, text: text}, nil
	case "":
		return transform{}, fmt.Errorf("empty transform (two pipes, or a pipe at the end)")
	}
	name, arg, hasArg := strings.Cut(text, "(")
	var kind transformKind
	switch name {
	case "last":
		kind = transformLast
	case "first":
		kind = transformFirst
	case "safe", "lower", "tokens":
		return transform{}, fmt.Errorf("transform %q takes no argument: write %s", text, name)
	default:
		return transform{}, fmt.Errorf("unknown transform %q", text)
	}
	sep, closed := strings.CutSuffix(arg, ")")
	switch {
	case !hasArg:
		return transform{}, fmt.Errorf("transform %q needs a separator: %s(SEP), e.g. %s(.)", text, name, name)
	case !closed || strings.ContainsAny(sep, "()"):
		return transform{}, fmt.Errorf("transform %q: bad parentheses: write %s(SEP), SEP one or more characters other than '|', '(', ')', '{' and '}'", text, name)
	case sep == "":
		return transform{}, fmt.Errorf("transform %q has an empty separator: write %s(SEP), e.g. %s(.)", text, name, name)
	}
	return transform{kind: kind, sep: sep, text: text}, nil
}

// placeholder returns the placeholder as written, e.g. {TypeName|last(.)}.
func (p *templatePart) placeholder() string {
	return p.with("", p.tokens)
}

// with returns the placeholder with one more transform (none when extra
// is ""), ending in |tokens when tokens is set.
func (p *templatePart) with(extra string, tokens bool) string {
	var b strings.Builder
	b.WriteString("{" + p.column)
	for _, tr := range p.transforms {
		b.WriteString("|" + tr.text)
	}
	if extra != "" {
		b.WriteString("|" + extra)
	}
	if tokens {
		b.WriteString("|tokens")
	}
	b.WriteString("}")
	return b.String()
}

// String returns the template text.
func (t *Template) String() string { return t.text }

// Columns returns the placeholder column names, in order.
func (t *Template) Columns() []string {
	var out []string
	for _, p := range t.parts {
		if p.column != "" {
			out = append(out, p.column)
		}
	}
	return out
}

// PlaceholderError is a placeholder whose value cannot go into a subject.
// Problem names the value (before and after the placeholder's transforms)
// and, where a transform would make it fit, that transform.
type PlaceholderError struct {
	Column  string
	Problem string
}

func (e *PlaceholderError) Error() string {
	return fmt.Sprintf("subject placeholder {%s}: %s", e.Column, e.Problem)
}

// Render builds the subject for an event. Each placeholder's value, after
// its transforms, must be a valid subject token (no dots, spaces or
// wildcards; with |tokens, dots between valid tokens) and not NULL;
// otherwise the error is a *PlaceholderError.
func (t *Template) Render(ev EventColumns) (string, error) {
	if len(t.parts) == 1 && t.parts[0].column == "" {
		return t.parts[0].literal, nil
	}
	var b strings.Builder
	b.Grow(len(t.text) + 32)
	for i := range t.parts {
		p := &t.parts[i]
		if p.column == "" {
			b.WriteString(p.literal)
			continue
		}
		raw, ok := ev.Column(p.column)
		if !ok {
			return "", &PlaceholderError{Column: p.column, Problem: "the column is NULL or missing"}
		}
		v := raw
		for _, tr := range p.transforms {
			v = tr.apply(v)
		}
		problem, c := valueOK, byte(0)
		if p.tokens {
			problem, c = checkTokens(v)
		} else {
			problem, c = checkToken(v)
		}
		if problem != valueOK {
			return "", p.invalid(raw, v, problem, c)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// renderAsWritten renders the subject the row asks for without checking
// its placeholders' values, for a dead letter's Outbox-Original-Subject:
// even a subject NATS would refuse tells the reader where the row was
// meant to go. ok is false when a placeholder's column is NULL or missing.
func (t *Template) renderAsWritten(ev EventColumns) (subject string, ok bool) {
	var b strings.Builder
	for i := range t.parts {
		p := &t.parts[i]
		if p.column == "" {
			b.WriteString(p.literal)
			continue
		}
		v, ok := ev.Column(p.column)
		if !ok {
			return "", false
		}
		for _, tr := range p.transforms {
			v = tr.apply(v)
		}
		b.WriteString(v)
	}
	return b.String(), true
}

// Filter is the subject filter that matches every subject the template can
// render: tokens holding a placeholder become "*", and the last token
// becomes ">" when its placeholder has |tokens.
func (t *Template) Filter() string {
	var b strings.Builder
	for _, p := range t.parts {
		switch {
		case p.tokens:
			b.WriteString("\x01")
		case p.column != "":
			b.WriteString("\x00")
		default:
			b.WriteString(p.literal)
		}
	}
	tokens := strings.Split(b.String(), ".")
	for i, tok := range tokens {
		switch {
		case strings.Contains(tok, "\x01"):
			tokens[i] = ">"
		case strings.Contains(tok, "\x00"):
			tokens[i] = "*"
		}
	}
	return strings.Join(tokens, ".")
}

// StreamSubject is the subject a created stream captures: the literal
// tokens before the first placeholder, then ">". It fails when the template
// starts with a placeholder, since such a stream would capture everything.
func (t *Template) StreamSubject() (string, error) {
	tokens := strings.Split(t.Filter(), ".")
	var prefix []string
	for _, tok := range tokens {
		if tok == "*" || tok == ">" {
			break
		}
		prefix = append(prefix, tok)
	}
	switch {
	case len(prefix) == len(tokens):
		return t.Filter(), nil
	case len(prefix) == 0:
		return "", fmt.Errorf("subject template %q starts with a placeholder, so outboxd cannot choose the stream's subjects: create the stream yourself", t.text)
	}
	return strings.Join(prefix, ".") + ".>", nil
}

func validSubject(s string) error {
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return fmt.Errorf("subject %q has an empty token (two dots, or a leading or trailing dot)", s)
		}
	}
	return nil
}

// valueProblem is what keeps a rendered value out of a subject.
type valueProblem uint8

const (
	valueOK valueProblem = iota
	valueEmpty
	valueDot
	valueWildcard
	valueSpace      // whitespace or a control character
	valueEmptyToken // |tokens: two dots, or a leading or trailing one
)

// checkToken checks one rendered placeholder value, and returns the byte
// at fault. It allocates nothing: it runs for every placeholder of every
// event.
func checkToken(v string) (valueProblem, byte) {
	if v == "" {
		return valueEmpty, 0
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '.':
			return valueDot, c
		case c == '*' || c == '>':
			return valueWildcard, c
		case c <= ' ' || c == 0x7f:
			return valueSpace, c
		}
	}
	return valueOK, 0
}

// checkTokens checks the value of a |tokens placeholder: one or more
// valid tokens joined by dots.
func checkTokens(v string) (valueProblem, byte) {
	if v == "" {
		return valueEmpty, 0
	}
	for tok := range strings.SplitSeq(v, ".") {
		if tok == "" {
			return valueEmptyToken, '.'
		}
		if problem, c := checkToken(tok); problem != valueOK {
			return problem, c
		}
	}
	return valueOK, 0
}

// safeToken is the safe transform: every byte checkToken refuses in a
// non-empty value becomes '_'. They are all ASCII, so UTF-8 stays intact.
func safeToken(v string) string {
	i := 0
	for ; i < len(v); i++ {
		if unsafeByte(v[i]) {
			break
		}
	}
	if i == len(v) {
		return v
	}
	b := []byte(v)
	for ; i < len(b); i++ {
		if unsafeByte(b[i]) {
			b[i] = '_'
		}
	}
	return string(b)
}

func unsafeByte(c byte) bool {
	return c == '.' || c == '*' || c == '>' || c <= ' ' || c == 0x7f
}

// invalid is the error for a value (raw before the transforms, v after)
// that cannot fill p: it names the value and, where one helps, the
// transform that makes such values fit.
func (p *templatePart) invalid(raw, v string, problem valueProblem, c byte) *PlaceholderError {
	var b strings.Builder
	fmt.Fprintf(&b, "value %q", raw)
	if len(p.transforms) > 0 {
		fmt.Fprintf(&b, " (%q after %s)", v, p.placeholder())
	}
	safe := fmt.Sprintf("%s turns it into '_'", p.with("safe", false))
	if p.tokens {
		safe = fmt.Sprintf("%s turns it (and the dots) into '_'", p.with("safe", false))
	}
	switch problem {
	case valueEmpty:
		b.WriteString(" is empty, not a valid subject token")
		if len(p.transforms) > 0 && raw != "" {
			b.WriteString("; fix: change the transforms so that they leave some of the value")
		}
		return &PlaceholderError{Column: p.column, Problem: b.String()}
	case valueDot:
		b.WriteString(" is not a valid subject token: it contains '.'")
		safe = fmt.Sprintf("%s keeps the part after the last dot, %s turns the dots into '_'", p.with("last(.)", false), p.with("safe", false))
		if p.canTokens {
			safe += fmt.Sprintf(", %s publishes each part as a subject token", p.with("", true))
		}
	case valueWildcard:
		fmt.Fprintf(&b, " is not a valid subject token: it contains the wildcard %q", c)
	case valueSpace:
		b.WriteString(" is not a valid subject token: it contains whitespace or a control character")
	case valueEmptyToken:
		b.WriteString(" is not a valid subject token: it has an empty part between dots (or a leading or trailing dot)")
		safe = fmt.Sprintf("%s turns the dots into '_'", p.with("safe", false))
	}
	fmt.Fprintf(&b, "; fix: a transform in the subject template: %s", safe)
	return &PlaceholderError{Column: p.column, Problem: b.String()}
}

// subjectCovers reports whether the stream subject filter captures every
// subject matched by sub (both may hold wildcards).
func subjectCovers(filter, sub string) bool {
	ft := strings.Split(filter, ".")
	st := strings.Split(sub, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) {
			return false
		}
		switch {
		case st[i] == ">":
			return false
		case f == "*":
		case f != st[i]:
			return false
		}
	}
	return len(ft) == len(st)
}
