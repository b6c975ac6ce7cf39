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
// quotes, where "" stands for one quote and commas or '=' may appear. The
// mapping replaces the default one: a field left out is not read. id and
// payload are required; one column may feed several fields.
func ParseColumns(s string) (Columns, error) {
	var names [numFields]string
	entries, err := splitMapping(s)
	if err != nil {
		return Columns{}, fmt.Errorf("column mapping %q: %w", s, err)
	}
	for _, e := range entries {
		f, ok := fieldByKey(e.field)
		if !ok {
			return Columns{}, fmt.Errorf("column mapping %q: unknown field %q: use %s", s, e.field, strings.Join(FieldNames, ", "))
		}
		if names[f] != "" {
			return Columns{}, fmt.Errorf("column mapping %q: field %s is mapped twice (to %q and %q): map each field once", s, e.field, names[f], e.column)
		}
		names[f] = e.column
	}
	c := columnsOf(names)
	if err := c.checkRequired(); err != nil {
		return Columns{}, fmt.Errorf("column mapping %q: %w", s, err)
	}
	return c, nil
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
		if strings.ContainsAny(col, `,="`) || strings.TrimSpace(col) != col {
			col = `"` + strings.ReplaceAll(col, `"`, `""`) + `"`
		}
		b.WriteString(col)
	}
	return b.String()
}

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

// mappingEntry is one field=column pair of a mapping.
type mappingEntry struct{ field, column string }

// splitMapping splits "a=b,c=\"D,E\"" into its pairs.
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
		column, after, err := mappingColumn(rest[eq+1:])
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", key, err)
		}
		out = append(out, mappingEntry{field: key, column: column})
		if after == "" {
			return out, nil
		}
		rest = after
	}
}

// mappingColumn reads one column name, plain or quoted, and returns what
// follows its comma ("" at the end).
func mappingColumn(s string) (column, rest string, err error) {
	s = strings.TrimLeft(s, " ")
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		i := 1
		for {
			if i >= len(s) {
				return "", "", errors.New("unterminated quoted column name")
			}
			if s[i] == '"' {
				if i+1 < len(s) && s[i+1] == '"' {
					b.WriteByte('"')
					i += 2
					continue
				}
				break
			}
			b.WriteByte(s[i])
			i++
		}
		after := strings.TrimLeft(s[i+1:], " ")
		switch {
		case after == "":
		case after[0] == ',':
			after = after[1:]
			if strings.TrimSpace(after) == "" {
				return "", "", errors.New("trailing comma")
			}
		default:
			return "", "", fmt.Errorf("unexpected %q after the quoted name", after[0])
		}
		if b.Len() == 0 {
			return "", "", errors.New("empty column name")
		}
		return b.String(), after, nil
	}
	column, after, found := strings.Cut(s, ",")
	column = strings.TrimSpace(column)
	if column == "" {
		return "", "", errors.New("empty column name: name the table's column, e.g. id=Id")
	}
	if strings.ContainsAny(column, `="`) {
		return "", "", fmt.Errorf("column name %q holds '=' or '\"': quote it, e.g. \"A=B\", or check for a missing comma", column)
	}
	if found && strings.TrimSpace(after) == "" {
		return "", "", errors.New("trailing comma")
	}
	return column, after, nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
