package decoder

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// field indexes Event's mapped fields.
type field uint8

const (
	fID field = iota
	fAggregateType
	fAggregateID
	fEventType
	fPayload
	fHeaders
	fCreatedAt
	numFields
)

// fieldNames are the Columns field names, for messages about a Config.
var fieldNames = [numFields]string{"ID", "AggregateType", "AggregateID", "EventType", "Payload", "Headers", "CreatedAt"}

// fieldRequired: an event needs an id (its Nats-Msg-Id) and a payload (its
// body); every other field may be left unmapped, for tables that lack it.
func fieldRequired(f field) bool { return f == fID || f == fPayload }

func fieldColumns(c Columns) [numFields]string {
	return [numFields]string{c.ID, c.AggregateType, c.AggregateID, c.EventType, c.Payload, c.Headers, c.CreatedAt}
}

// Type OIDs of the built-in types outboxd reads.
const (
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidVarchar     = 1043
	oidUUID        = 2950
	oidJSONB       = 3802
)

// fieldTypes lists the column types each field accepts. Integer ids come
// as their decimal text, which is what the message id becomes.
var fieldTypes = [numFields][]uint32{
	fID:            {oidUUID, oidText, oidVarchar, oidInt2, oidInt4, oidInt8},
	fAggregateType: {oidText, oidVarchar},
	fAggregateID:   {oidText, oidVarchar},
	fEventType:     {oidText, oidVarchar},
	fPayload:       {oidJSONB, oidJSON, oidText, oidVarchar, oidBytea},
	fHeaders:       {oidJSONB, oidJSON, oidText, oidVarchar},
	fCreatedAt:     {oidTimestamptz, oidTimestamp},
}

// jsonTypes are the column types a JSON path reads: those that hold JSON
// text (text and varchar must hold valid JSON in each row).
var jsonTypes = []uint32{oidJSONB, oidJSON, oidText, oidVarchar}

// acceptedTypes is what field f accepts under mapping c.
func acceptedTypes(c Columns, f field) (types []uint32, what string) {
	if p := c.path(f); !p.IsZero() {
		return jsonTypes, fmt.Sprintf("field %s with the JSON path %s", fieldKeys[f], p)
	}
	return fieldTypes[f], "field " + fieldKeys[f]
}

// typeName names common built-in types in schema errors; pgoutput sends only
// the OID, and a user reads "int4" faster than "23".
func typeName(oid uint32) string {
	switch oid {
	case 16:
		return "boolean"
	case oidBytea:
		return "bytea"
	case 18:
		return "char"
	case 19:
		return "name"
	case oidInt8:
		return "bigint"
	case oidInt2:
		return "smallint"
	case oidInt4:
		return "integer"
	case oidText:
		return "text"
	case oidJSON:
		return "json"
	case 700:
		return "real"
	case 701:
		return "double precision"
	case 1042:
		return "character"
	case oidVarchar:
		return "varchar"
	case 1082:
		return "date"
	case 1083:
		return "time"
	case oidTimestamp:
		return "timestamp"
	case oidTimestamptz:
		return "timestamptz"
	case 1700:
		return "numeric"
	case oidUUID:
		return "uuid"
	case oidJSONB:
		return "jsonb"
	}
	return fmt.Sprintf("type oid %d", oid)
}

func typeList(oids []uint32) string {
	var b strings.Builder
	for i, oid := range oids {
		switch {
		case i == 0:
		case i == len(oids)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(typeName(oid))
	}
	return b.String()
}

// relColumn is one column of a Relation message.
type relColumn struct {
	name  string
	typ   uint32
	flags uint8 // 1 = part of the replica identity key
}

// relation is a cached Relation message. It is never modified once cached:
// events keep a pointer to it, and a later Relation message for the same id
// replaces the cache entry with a new relation.
type relation struct {
	id        uint32
	namespace string
	name      string
	cols      []relColumn

	// raw is the Relation message's body, kept with a Spool only: a
	// streamed Insert is spooled after the layout it was checked against.
	raw []byte

	outbox bool
	// partition: the relation is a partition of the outbox table
	// (Config.Partitions); an Insert naming it is partitionError.
	partition bool
	// err is set when this is the outbox table but its columns do not fit
	// the mapping; Inserts into it return err.
	err *SchemaError
	// For a usable outbox table: the column index of each mapped field (-1
	// when not mapped) and, per column, a bitmask of the fields it feeds
	// (one column may feed several fields).
	fieldCol [numFields]int
	fieldsOf []uint8
	// headerCol is the column index of each Columns.HeaderColumns entry.
	headerCol []int
}

func (rel *relation) column(name string) int {
	for i := range rel.cols {
		if rel.cols[i].name == name {
			return i
		}
	}
	return -1
}

func (d *Decoder) decodeRelation(body []byte) (Change, error) {
	rel, err := d.cacheRelation(body)
	if err != nil {
		return Change{}, err
	}
	if rel.err != nil {
		return Change{}, rel.err
	}
	return Change{}, nil
}

// cacheRelation reads a Relation message and caches it, even when it is
// the outbox table and its columns do not fit the mapping (rel.err).
func (d *Decoder) cacheRelation(body []byte) (*relation, error) {
	r := reader{b: body}
	id := r.u32("relation id")
	ns := r.cstring("namespace")
	name := r.cstring("relation name")
	r.u8("replica identity")
	n := int(r.u16("column count"))
	if r.short != "" {
		return nil, r.check("relation")
	}
	// Each column takes at least 10 bytes; checking first keeps a corrupt
	// count from allocating a large slice.
	const minColumnSize = 1 + 1 + 4 + 4
	if n*minColumnSize > r.remaining() {
		return nil, malformed("relation: %d columns need at least %d bytes, %d left", n, n*minColumnSize, r.remaining())
	}
	cols := make([]relColumn, n)
	for i := range cols {
		cols[i].flags = r.u8("column flags")
		cname := r.cstring("column name")
		cols[i].typ = r.u32("column type")
		r.u32("column type modifier")
		if r.short != "" {
			break
		}
		cols[i].name = string(cname)
	}
	if err := r.check("relation"); err != nil {
		return nil, err
	}
	rel := &relation{
		id:        id,
		namespace: string(ns),
		name:      string(name),
		cols:      cols,
		outbox:    string(ns) == d.schema && string(name) == d.table,
	}
	if d.spool != nil {
		rel.raw = bytes.Clone(body)
	}
	// pgoutput sends a partition's Relation message even when it sends
	// the partition's rows as the table's (after the table's, for its
	// own use): only an Insert that names the partition is wrong.
	rel.partition = !rel.outbox && d.partitions[id]
	if rel.outbox {
		rel.err = d.mapColumns(rel)
	}
	d.rels[id] = rel
	return rel, nil
}

// partitionError is the error of a row sent as a partition's instead of
// the outbox table's: the publication's publish_via_partition_root is
// off, and the row would otherwise be skipped as another table's.
func (d *Decoder) partitionError(rel *relation) *SchemaError {
	return &SchemaError{Table: d.schema + "." + d.table, Reason: fmt.Sprintf("the publication sends the rows of its "+
		"partition %s.%s as that partition's, not the table's, so outboxd would skip them: publish_via_partition_root is "+
		"off; fix: ALTER PUBLICATION ... SET (publish_via_partition_root = true), then recover the rows written since "+
		"the change with outboxd backfill --since (see the runbook, \"Partitioned outbox tables\")", rel.namespace, rel.name)}
}

// mapColumns checks that the outbox relation has every mapped column with a
// usable type and records where each field is.
func (d *Decoder) mapColumns(rel *relation) *SchemaError {
	cols := make([]TableColumn, len(rel.cols))
	for i, c := range rel.cols {
		cols[i] = TableColumn{Name: c.name, Type: c.typ}
	}
	table := rel.namespace + "." + rel.name
	fieldCol, err := checkMapping(table, d.columns, cols)
	if err != nil {
		return err
	}
	if rel.headerCol, err = mapHeaderColumns(table, d.columns.HeaderColumns, cols); err != nil {
		return err
	}
	rel.fieldCol = fieldCol
	rel.fieldsOf = make([]uint8, len(rel.cols))
	for f, i := range fieldCol {
		if i >= 0 {
			rel.fieldsOf[i] |= 1 << f
		}
	}
	return nil
}

// TableColumn is one column of the outbox table: its name as the catalog
// has it and its type's OID.
type TableColumn struct {
	Name string
	Type uint32
}

// checkMapping finds each mapped field's column in cols (-1 when the field
// is not mapped) and checks its type. The Relation message and the catalog
// are checked by the same rules, so a table that passes at start is not
// refused by the first Relation message.
func checkMapping(table string, c Columns, cols []TableColumn) ([numFields]int, *SchemaError) {
	var fieldCol [numFields]int
	names := fieldColumns(c)
	for f := range numFields {
		fieldCol[f] = -1
		if names[f] == "" {
			continue
		}
		i := slices.IndexFunc(cols, func(tc TableColumn) bool { return tc.Name == names[f] })
		if i < 0 {
			return fieldCol, &SchemaError{Table: table, Column: names[f],
				Reason: fmt.Sprintf("does not exist (field %s is mapped to it); the table has %s: map %s to one of those (names are case-sensitive), or add the column (a publication column list must include it)",
					fieldKeys[f], columnList(cols), fieldKeys[f])}
		}
		if types, what := acceptedTypes(c, f); !typeIn(cols[i].Type, types) {
			return fieldCol, &SchemaError{Table: table, Column: names[f],
				Reason: fmt.Sprintf("has type %s, but %s accepts %s: change the column's type or map %s to another column",
					typeName(cols[i].Type), what, typeList(types), fieldKeys[f])}
		}
		fieldCol[f] = i
	}
	return fieldCol, nil
}

// columnList names the table's columns for an error, quoted.
func columnList(cols []TableColumn) string {
	have := make([]string, len(cols))
	for j, tc := range cols {
		have[j] = strconv.Quote(tc.Name)
	}
	return strings.Join(have, ", ")
}

func typeIn(oid uint32, oids []uint32) bool {
	for _, o := range oids {
		if o == oid {
			return true
		}
	}
	return false
}
