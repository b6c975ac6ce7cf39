package decoder

import (
	"fmt"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/event"
)

// headerEntryPrefix starts a --columns entry that makes a header of a
// column: header.Content-Type=ContentType.
const headerEntryPrefix = "header."

// reservedHeaderPrefixes are the header names a column may not fill:
// Nats-* steer JetStream (dedupe, expectations, TTLs) and Outbox-* are
// outboxd's own.
var reservedHeaderPrefixes = []string{"Nats-", "Outbox-"}

// checkHeaderColumns checks the header.NAME entries: each name a usable
// header name, outside the reserved prefixes, and mapped once.
func checkHeaderColumns(hcs []HeaderColumn) error {
	for i, h := range hcs {
		if h.Column == "" {
			return fmt.Errorf("%s%s has no column: name the table's column, e.g. %sContent-Type=ContentType", headerEntryPrefix, h.Name, headerEntryPrefix)
		}
		if err := event.CheckHeader(h.Name, ""); err != nil {
			return fmt.Errorf("%s%s=%s: %w", headerEntryPrefix, h.Name, quoteName(h.Column), err)
		}
		for _, p := range reservedHeaderPrefixes {
			if len(h.Name) >= len(p) && strings.EqualFold(h.Name[:len(p)], p) {
				return fmt.Errorf("%s%s=%s: headers starting with %s are set by JetStream and outboxd, not by a column: choose another name", headerEntryPrefix, h.Name, quoteName(h.Column), p)
			}
		}
		if j := slices.IndexFunc(hcs[:i], func(o HeaderColumn) bool { return o.Name == h.Name }); j >= 0 {
			return fmt.Errorf("header %s is mapped twice (to %q and %q): map each header once", h.Name, hcs[j].Column, h.Column)
		}
	}
	return nil
}

// CheckHeaders checks what the headers mapping says beyond the column
// names: the format of the headers column and the header columns. New
// checks it too; a caller checks it first to report it with its settings.
func (c Columns) CheckHeaders() error {
	switch c.HeadersFormat {
	case HeadersJSON:
	case HeadersProperties:
		if c.Headers == "" {
			return fmt.Errorf("headers format %q reads the headers column, which is not mapped: map it, e.g. --columns ...,headers=tracingspancontext", c.HeadersFormat)
		}
		if !c.HeadersPath.IsZero() {
			return fmt.Errorf("headers format %q has no JSON path: map headers to the whole column (headers=%s, without %s)", c.HeadersFormat, quoteName(c.Headers), c.HeadersPath)
		}
	default:
		return fmt.Errorf("headers format %q is not one of json, properties", c.HeadersFormat)
	}
	return checkHeaderColumns(c.HeaderColumns)
}

// ParseHeadersFormat reads --headers-format: json or properties.
func ParseHeadersFormat(s string) (HeadersFormat, error) {
	switch s {
	case "", "json":
		return HeadersJSON, nil
	case string(HeadersProperties):
		return HeadersProperties, nil
	}
	return "", fmt.Errorf("headers format %q is not one of json (a JSON object, the default), properties (Java properties text, e.g. Debezium's tracingspancontext)", s)
}

// mapHeaderColumns finds each header column in cols; bytea is refused,
// since its text form (\x…) is no header value.
func mapHeaderColumns(table string, hcs []HeaderColumn, cols []TableColumn) ([]int, *SchemaError) {
	if len(hcs) == 0 {
		return nil, nil
	}
	idx := make([]int, len(hcs))
	for k, h := range hcs {
		i := slices.IndexFunc(cols, func(tc TableColumn) bool { return tc.Name == h.Column })
		if i < 0 {
			return nil, &SchemaError{Table: table, Column: h.Column,
				Reason: fmt.Sprintf("does not exist (header %s is mapped to it); the table has %s: map the header to one of those (names are case-sensitive), or add the column (a publication column list must include it)",
					h.Name, columnList(cols))}
		}
		if cols[i].Type == oidBytea {
			return nil, &SchemaError{Table: table, Column: h.Column,
				Reason: fmt.Sprintf("has type bytea, which is no header value (header %s is mapped to it): map the header to a text column", h.Name)}
		}
		idx[k] = i
	}
	return idx, nil
}

// columnHeaders appends the headers read from their own columns to hs, or
// returns the RowError fields of the first unusable value: its column and
// why.
func (d *Decoder) columnHeaders(rel *relation, tuple []byte, hs []event.Header) (_ []event.Header, column, reason string) {
	for k, h := range d.columns.HeaderColumns {
		i := rel.headerCol[k]
		kind, val, ok := tupleValue(tuple, i)
		switch {
		case !ok:
			return nil, h.Column, "is missing from the row"
		case kind == 'n':
			continue
		case kind != 't':
			return nil, h.Column, kindReason(kind)
		}
		value := string(val)
		if err := event.CheckHeader(h.Name, value); err != nil {
			return nil, h.Column, fmt.Sprintf("cannot fill %v; clean the value or map another column", err)
		}
		// A copy: the caller's slice stays whole if a later column fails
		// (a dead letter then carries the headers column's headers).
		if same := func(o event.Header) bool { return o.Key == h.Name }; slices.ContainsFunc(hs, same) {
			hs = slices.DeleteFunc(slices.Clone(hs), same)
		}
		hs = append(hs[:len(hs):len(hs)], event.Header{Key: h.Name, Value: value})
	}
	return hs, "", ""
}
