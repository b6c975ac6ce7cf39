package sink

import (
	"fmt"
	"strings"
)

// Template renders a subject from an event's columns: literal text with
// {column} placeholders, e.g. "outbox.{aggregate_type}.{event_type}".
type Template struct {
	text  string
	parts []templatePart
}

type templatePart struct {
	literal string
	column  string // set for a placeholder
}

// EventColumns is the part of an event a template reads.
type EventColumns interface {
	Column(name string) (string, bool)
}

// ParseTemplate parses a subject template. Literal text may not hold
// characters NATS forbids in subjects; placeholders name a column.
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
		column := rest[open+1 : open+end]
		if column == "" || strings.ContainsAny(column, "{ ") {
			return nil, fmt.Errorf("subject template %q: bad placeholder {%s}: use {column_name}", text, column)
		}
		t.parts = append(t.parts, templatePart{column: column})
		rest = rest[open+end+1:]
	}
	if len(t.parts) == 0 {
		return nil, fmt.Errorf("subject template is empty: use e.g. outbox.{aggregate_type}.{event_type}")
	}
	for _, p := range t.parts {
		if strings.ContainsAny(p.literal, " \t\r\n*>}") {
			return nil, fmt.Errorf("subject template %q: literal %q holds a character NATS subjects do not allow (space, *, >, })", text, p.literal)
		}
	}
	if err := validSubject(t.Filter()); err != nil {
		return nil, fmt.Errorf("subject template %q: %w", text, err)
	}
	return t, nil
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
type PlaceholderError struct {
	Column  string
	Problem string
}

func (e *PlaceholderError) Error() string {
	return fmt.Sprintf("subject placeholder {%s}: %s", e.Column, e.Problem)
}

// Render builds the subject for an event. Each placeholder's value must be a
// valid subject token (no dots, spaces or wildcards) and not NULL; otherwise
// the error is a *PlaceholderError.
func (t *Template) Render(ev EventColumns) (string, error) {
	if len(t.parts) == 1 && t.parts[0].column == "" {
		return t.parts[0].literal, nil
	}
	var b strings.Builder
	b.Grow(len(t.text) + 32)
	for _, p := range t.parts {
		if p.column == "" {
			b.WriteString(p.literal)
			continue
		}
		v, ok := ev.Column(p.column)
		if !ok {
			return "", &PlaceholderError{Column: p.column, Problem: "the column is NULL or missing"}
		}
		if err := validToken(v); err != nil {
			return "", &PlaceholderError{Column: p.column, Problem: fmt.Sprintf("value %q %v", v, err)}
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
	for _, p := range t.parts {
		if p.column == "" {
			b.WriteString(p.literal)
			continue
		}
		v, ok := ev.Column(p.column)
		if !ok {
			return "", false
		}
		b.WriteString(v)
	}
	return b.String(), true
}

// Filter is the subject filter that matches every subject the template can
// render: tokens holding a placeholder become "*".
func (t *Template) Filter() string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.column != "" {
			b.WriteString("\x00")
		} else {
			b.WriteString(p.literal)
		}
	}
	tokens := strings.Split(b.String(), ".")
	for i, tok := range tokens {
		if strings.Contains(tok, "\x00") {
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
		if tok == "*" {
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

// validToken checks one rendered placeholder value; the error reads after
// the value, as in `value "a b" is not a valid subject token: ...`.
func validToken(v string) error {
	if v == "" {
		return fmt.Errorf("is empty, not a valid subject token")
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '.':
			return fmt.Errorf("is not a valid subject token: it contains '.'")
		case c == '*' || c == '>':
			return fmt.Errorf("is not a valid subject token: it contains the wildcard %q", c)
		case c <= ' ' || c == 0x7f:
			return fmt.Errorf("is not a valid subject token: it contains whitespace or a control character")
		}
	}
	return nil
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
