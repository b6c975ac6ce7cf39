// Package decoder turns the pgoutput logical replication stream (protocol
// version 1) into outbox events.
//
// The replication package hands each XLogData payload to Decoder.Decode,
// in order, from one goroutine. Decode returns a Change: Begin and Commit
// frame a transaction (Commit carries the end LSN to confirm once every
// event is acknowledged downstream), Insert carries an *Event for each row
// of the configured outbox table, and everything else is None: Relation
// messages (cached by relation id and checked against the column mapping),
// rows of other tables, Updates, Deletes, Truncates, Origin, Type, logical
// messages and stream messages.
//
//	dec, err := decoder.New(decoder.Config{}) // public.outbox, default columns
//	...
//	ch, err := dec.Decode(xld.WALStart, payloadCopy)
//	var schemaErr *decoder.SchemaError
//	var rowErr *decoder.RowError
//	switch {
//	case errors.Is(err, decoder.ErrMalformed): // the stream itself is broken
//	case errors.As(err, &schemaErr):           // the table does not fit the mapping
//	case errors.As(err, &rowErr):              // one row cannot become an event
//	}
//
// The parser is written by hand rather than with pglogrepl.Parse: every read
// is bounds-checked, so a truncated or corrupt message returns an error
// wrapping ErrMalformed instead of panicking, and values are not copied per
// column. An Event's Payload and the row behind Event.Column alias the
// bytes passed to Decode; the caller passes a private copy (pgconn reuses
// its receive buffer) and never modifies it afterwards. The ID, aggregate
// and type strings are copied so that keeping them does not pin the
// message.
//
// Values are read in text format. The replication connection must use
// DateStyle ISO (created_at is parsed from it; outboxd also sets TimeZone
// UTC) and bytea_output hex for a bytea payload.
package decoder
