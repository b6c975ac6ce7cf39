package decoder

import (
	"errors"
	"fmt"
	"strings"
)

// FieldNames lists outboxd's event fields by the names --columns and
// subject templates use, in Columns order.
var FieldNames = fieldKeys[:]

// fieldKeys are the fields' names for users: the keys of --columns, and the
// names a subject placeholder may use for a mapped field.
var fieldKeys = [numFields]string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "headers", "created_at"}

// ParseColumns reads a column mapping "field=column,field=column", e.g.
// `id=Id,event_type=Topic,payload=Payload,created_at=CreatedAt`. Fields are
// outboxd's (FieldNames); columns are the table's names exactly as the
// catalog has them (case-sensitive, never folded), optionally in double
// quotes, where "" stands for one quote and commas, '=' or "->" may appear.
// payload and headers may read part of a JSON column: a column followed by
// one or more "->key" (PostgreSQL's -> notation), e.g.
// `payload=Content->Value,headers=Content->Headers`. A key is written as
// is, in double quotes like a column, or in single quotes as SQL writes
// it (where two single quotes stand for one). The mapping replaces the
// default one: a field left out is not read. id and payload are required;
// one column may feed several fields.
//
// Errors name the mapping, the entry and the fix: an unknown field, one
// mapped twice, a required one left out, a path on a field that takes
// none, and any syntax error (an empty name, a trailing comma, an
// unterminated quote, ->> in place of ->).
func ParseColumns(s string) (Columns, error) {
	var names [numFields]string
	var paths [numFields]JSONPath
	entries, err := splitMapping(s)
	if err != nil {
		return Columns{}, fmt.Errorf("column mapping %q: %w", s, err)
	}
	var headerCols []HeaderColumn
	for _, e := range entries {
		if name, ok := strings.CutPrefix(e.field, headerEntryPrefix); ok {
			if len(e.keys) > 0 {
				return Columns{}, fmt.Errorf("column mapping %q: %s=%s%s: %w", s, e.field, quoteName(e.column), mustPath(e.keys), errNoPath)
			}
			headerCols = append(headerCols, HeaderColumn{Name: name, Column: e.column})
			continue
		}
		f, ok := fieldByKey(e.field)
		if !ok {
			return Columns{}, fmt.Errorf("column mapping %q: unknown field %q: use %s, or header.NAME for a header from a column", s, e.field, strings.Join(FieldNames, ", "))
		}
		if names[f] != "" {
			return Columns{}, fmt.Errorf("column mapping %q: field %s is mapped twice (to %q and %q): map each field once", s, e.field, names[f], e.column)
		}
		names[f] = e.column
		if len(e.keys) > 0 {
			if !fieldTakesPath(f) {
				return Columns{}, fmt.Errorf("column mapping %q: field %s=%s%s: %w", s, e.field, quoteName(e.column), mustPath(e.keys), errNoPath)
			}
			if paths[f], err = NewJSONPath(e.keys...); err != nil {
				return Columns{}, fmt.Errorf("column mapping %q: field %s: %w", s, e.field, err)
			}
		}
	}
	c := columnsOf(names)
	c.PayloadPath, c.HeadersPath = paths[fPayload], paths[fHeaders]
	c.HeaderColumns = headerCols
	if err := c.checkRequired(); err != nil {
		return Columns{}, fmt.Errorf("column mapping %q: %w", s, err)
	}
	if err := checkHeaderColumns(headerCols); err != nil {
		return Columns{}, fmt.Errorf("column mapping %q: %w", s, err)
	}
	return c, nil
}

// mustPath formats keys as a path for an error message, NUL or not.
func mustPath(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("->")
		b.WriteString(quoteName(k))
	}
	return b.String()
}

// String returns the mapping in ParseColumns' form, quoting a column name
// only where it must be.
func (c Columns) String() string {
	var b strings.Builder
	for f, col := range fieldColumns(c) {
		if col == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(fieldKeys[f])
		b.WriteByte('=')
		b.WriteString(quoteName(col))
		b.WriteString(c.path(field(f)).String())
	}
	for _, h := range c.HeaderColumns {
		fmt.Fprintf(&b, ",%s%s=%s", headerEntryPrefix, h.Name, quoteName(h.Column))
	}
	return b.String()
}

// quoteName writes a column name or a path key as ParseColumns reads it:
// in double quotes where it must be.
func quoteName(s string) string {
	if s == "" || strings.ContainsAny(s, `,="`) || strings.Contains(s, "->") || strings.TrimSpace(s) != s ||
		s[0] == '\'' || s[0] == '>' {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// path is a field's JSON path; only payload and headers have one.
func (c Columns) path(f field) JSONPath {
	switch f {
	case fPayload:
		return c.PayloadPath
	case fHeaders:
		return c.HeadersPath
	}
	return JSONPath{}
}

// fieldTakesPath: the fields that may read part of a JSON column.
func fieldTakesPath(f field) bool { return f == fPayload || f == fHeaders }

// Mapped returns the table column of a field (by its FieldNames name) and
// whether it is mapped.
func (c Columns) Mapped(key string) (column string, ok bool) {
	f, ok := fieldByKey(key)
	if !ok {
		return "", false
	}
	col := fieldColumns(c)[f]
	return col, col != ""
}

// Names lists the distinct table columns the mapping reads, in field order.
func (c Columns) Names() []string {
	var names []string
	for _, name := range fieldColumns(c) {
		if name != "" && !containsString(names, name) {
			names = append(names, name)
		}
	}
	for _, h := range c.HeaderColumns {
		if !containsString(names, h.Column) {
			names = append(names, h.Column)
		}
	}
	return names
}

// CheckTable checks the outbox table's columns as the catalog lists them,
// before any Relation message arrives, by the decoder's rules: the error is
// the *SchemaError the first Insert would otherwise get, naming the column,
// its type and the types the field accepts.
func (c Columns) CheckTable(table string, cols []TableColumn) error {
	if err := c.checkRequired(); err != nil {
		return err
	}
	if _, err := checkMapping(table, c, cols); err != nil {
		return err
	}
	if _, err := mapHeaderColumns(table, c.HeaderColumns, cols); err != nil {
		return err
	}
	return nil
}

func (c Columns) checkRequired() error {
	for f, col := range fieldColumns(c) {
		if col == "" && fieldRequired(field(f)) {
			return fmt.Errorf("field %s is not mapped: every event needs one (%s are required), e.g. %s=%s", fieldKeys[f], requiredKeys(), fieldKeys[f], DefaultColumns().fieldColumn(field(f)))
		}
	}
	return nil
}

func (c Columns) fieldColumn(f field) string { return fieldColumns(c)[f] }

func requiredKeys() string {
	var keys []string
	for f := range numFields {
		if fieldRequired(f) {
			keys = append(keys, fieldKeys[f])
		}
	}
	return strings.Join(keys, " and ")
}

func fieldByKey(key string) (field, bool) {
	for f, k := range fieldKeys {
		if k == key {
			return field(f), true
		}
	}
	return 0, false
}

func columnsOf(n [numFields]string) Columns {
	return Columns{ID: n[fID], AggregateType: n[fAggregateType], AggregateID: n[fAggregateID],
		EventType: n[fEventType], Payload: n[fPayload], Headers: n[fHeaders], CreatedAt: n[fCreatedAt]}
}

// mappingEntry is one field=column pair of a mapping, with the keys of
// its JSON path.
type mappingEntry struct {
	field, column string
	keys          []string
}

// splitMapping splits "a=b,c=\"D,E\"->k" into its pairs.
func splitMapping(s string) ([]mappingEntry, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("is empty: use field=column pairs, e.g. id=Id,payload=Payload")
	}
	var out []mappingEntry
	for rest := s; ; {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return nil, fmt.Errorf("%q is not field=column", strings.TrimSpace(rest))
		}
		key := strings.TrimSpace(rest[:eq])
		if key == "" {
			return nil, fmt.Errorf("%q has no field name before '='", strings.TrimSpace(rest))
		}
		e, after, err := mappingValue(rest[eq+1:])
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", key, err)
		}
		e.field = key
		out = append(out, e)
		if after == "" {
			return out, nil
		}
		rest = after
	}
}

// mappingValue reads a column name, plain or quoted, and the keys of its
// JSON path, and returns what follows their comma ("" at the end).
func mappingValue(s string) (e mappingEntry, rest string, err error) {
	e.column, rest, err = mappingName(s, "column name", "name the table's column, e.g. id=Id")
	if err != nil {
		return e, "", err
	}
	for {
		rest = strings.TrimLeft(rest, " ")
		switch {
		case rest == "":
			return e, "", nil
		case rest[0] == ',':
			if strings.TrimSpace(rest[1:]) == "" {
				return e, "", errors.New("trailing comma")
			}
			return e, rest[1:], nil
		case strings.HasPrefix(rest, "->"):
			var key string
			if key, rest, err = mappingKey(rest[2:]); err != nil {
				return e, "", err
			}
			e.keys = append(e.keys, key)
		default:
			return e, "", fmt.Errorf("unexpected %q after the quoted name", rest[0])
		}
	}
}

// mappingName reads a plain or double-quoted name and returns it with
// what follows it: a plain name ends at a comma or "->".
func mappingName(s, what, example string) (name, rest string, err error) {
	s = strings.TrimLeft(s, " ")
	if strings.HasPrefix(s, `"`) {
		return quotedName(s, '"', what)
	}
	end := len(s)
	if i := strings.IndexByte(s, ','); i >= 0 {
		end = i
	}
	if i := strings.Index(s[:end], "->"); i >= 0 {
		end = i
	}
	name = strings.TrimSpace(s[:end])
	if name == "" {
		return "", "", fmt.Errorf("empty %s: %s", what, example)
	}
	if strings.ContainsAny(name, `="`) {
		return "", "", fmt.Errorf("%s %q holds '=' or '\"': quote it, e.g. \"A=B\", or check for a missing comma", what, name)
	}
	return name, s[end:], nil
}

// mappingKey reads the key after "->": plain, in double quotes, or in
// single quotes as SQL writes it.
func mappingKey(s string) (key, rest string, err error) {
	s = strings.TrimLeft(s, " ")
	switch {
	case strings.HasPrefix(s, "'"):
		return quotedName(s, '\'', "JSON path key")
	case strings.HasPrefix(s, ">"):
		return "", "", errors.New("->> is not a JSON path step here: use -> (a JSON string at the end of the path gives its content anyway)")
	}
	return mappingName(s, "JSON path key", "name the key after ->, e.g. payload=Content->Value")
}

// quotedName reads a name in quotes q (s starts with one), where two
// quotes stand for one.
func quotedName(s string, q byte, what string) (name, rest string, err error) {
	var b strings.Builder
	i := 1
	for {
		if i >= len(s) {
			return "", "", fmt.Errorf("unterminated quoted %s", what)
		}
		if s[i] == q {
			if i+1 < len(s) && s[i+1] == q {
				b.WriteByte(q)
				i += 2
				continue
			}
			break
		}
		b.WriteByte(s[i])
		i++
	}
	if b.Len() == 0 && what == "column name" {
		return "", "", errors.New("empty column name")
	}
	return b.String(), s[i+1:], nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
