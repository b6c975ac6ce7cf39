package decoder

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/outboxd/outboxd/event"
)

// SnapshotColumn is one column of outbox rows read with SQL, as the
// result's field description names it.
type SnapshotColumn struct {
	// Name is the column name as PostgreSQL reports it (unquoted,
	// case-sensitive), exactly as pgoutput would send it.
	Name string
	// TypeOID is the column's type.
	TypeOID uint32
}

// SnapshotReader maps outbox rows read with SQL in text format (the
// backfill's read of an exported snapshot) to Events. It goes through the
// decoder's own path: the columns become a Relation message and each row an
// Insert, so the column mapping, the type and value checks, the errors and
// Event.Column are those of the stream, and a backfilled row becomes the
// same message as the same row streamed.
//
// The values must be the server's text output under the settings of the
// replication connection: DateStyle ISO, TimeZone UTC, bytea_output hex.
type SnapshotReader struct {
	d     *Decoder
	relID uint32
	ncols int
}

// snapshotRelID is the relation id the reader's Relation message uses; a
// Decoder used for a snapshot serves no stream, so no real id can clash.
const snapshotRelID = 1

// Snapshot returns a reader for outbox rows with the given columns, which
// must be those pgoutput sends for the configured table, in table order.
// Every Event it returns carries tx. It fails with a *SchemaError when the
// columns do not fit the mapping. Use a Decoder for nothing else after it.
func (d *Decoder) Snapshot(cols []SnapshotColumn, tx event.TxInfo) (*SnapshotReader, error) {
	if len(cols) > math.MaxUint16 {
		return nil, fmt.Errorf("snapshot: %d columns, more than a table can have", len(cols))
	}
	if d.spool != nil {
		return nil, fmt.Errorf("BUG: decoder.Snapshot on a Decoder with a Spool")
	}
	body := binary.BigEndian.AppendUint32(nil, snapshotRelID)
	body = append(append(body, d.schema...), 0)
	body = append(append(body, d.table...), 0)
	body = append(body, 'd')
	body = binary.BigEndian.AppendUint16(body, uint16(len(cols)))
	for _, c := range cols {
		body = append(body, 0)
		body = append(append(body, c.Name...), 0)
		body = binary.BigEndian.AppendUint32(body, c.TypeOID)
		body = binary.BigEndian.AppendUint32(body, math.MaxUint32) // typmod -1
	}
	rel, err := d.cacheRelation(body)
	if err != nil {
		return nil, err
	}
	if rel.err != nil {
		return nil, rel.err
	}
	d.begin(tx)
	return &SnapshotReader{d: d, relID: snapshotRelID, ncols: len(cols)}, nil
}

// Event maps one row; values[i] is column i's text value, nil for NULL.
// The Event shares no memory with values, which the caller may reuse.
// Errors: a *RowError for a row that cannot become an event, as Decode
// returns for the same row streamed.
func (s *SnapshotReader) Event(values [][]byte) (*event.Event, error) {
	if len(values) != s.ncols {
		return nil, fmt.Errorf("BUG: snapshot row with %d values, its columns are %d", len(values), s.ncols)
	}
	size := 4 + 1 + 2
	for _, v := range values {
		size += 1 + 4 + len(v)
	}
	// A fresh buffer per row: the Event aliases it (payload, Column).
	body := make([]byte, 0, size)
	body = binary.BigEndian.AppendUint32(body, s.relID)
	body = append(body, 'N')
	body = binary.BigEndian.AppendUint16(body, uint16(len(values)))
	for _, v := range values {
		if v == nil {
			body = append(body, 'n')
			continue
		}
		body = append(body, 't')
		body = binary.BigEndian.AppendUint32(body, uint32(len(v)))
		body = append(body, v...)
	}
	change, err := s.d.decodeInsert(0, body)
	if err != nil {
		return nil, err
	}
	if change.Event == nil {
		return nil, fmt.Errorf("BUG: snapshot row of %s.%s decoded to no event", s.d.schema, s.d.table)
	}
	return change.Event, nil
}
