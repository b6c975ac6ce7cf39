// Package decoder turns the pgoutput logical replication stream (protocol
// version 1, or version 2 with streaming of in-progress transactions) into
// outbox events.
//
// The replication package hands each XLogData payload to Decoder.Decode,
// in order, from one goroutine. Decode returns a Change: Begin and Commit
// frame a transaction (Commit carries the end LSN to confirm once every
// event is acknowledged downstream), Insert carries an *Event for each row
// of the configured outbox table, and everything else is None: Relation
// messages (cached by relation id and checked against the column mapping),
// rows of other tables, Updates, Deletes, Truncates, Origin, Type, and, by
// default, logical messages and stream messages (see below).
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
// With Config.Messages, logical decoding messages (pg_logical_emit_message)
// decode to Kind Message: transactional ones inside their transaction,
// the others on their own.
//
// With Config.Spool, the stream is protocol version 2 (start replication
// with proto_version '2', streaming 'on'): a transaction too large for the
// server's logical_decoding_work_mem arrives in segments before it
// commits, possibly with whole transactions of other xids in between. The
// Decoder writes each segment's changes to the Spool's files (Decode
// returns None for them) and returns Kind StreamCommit when the
// transaction commits; the caller then replays it, from disk, before the
// next Decode:
//
//	spool, err := decoder.NewSpool("") // files under os.TempDir()
//	...
//	defer spool.Close()
//	dec, err := decoder.New(decoder.Config{Spool: spool})
//	...
//	ch, err := dec.Decode(xld.WALStart, payloadCopy)
//	if ch.Kind == decoder.StreamCommit {
//		for c, err := range dec.Replay(ch.Tx.Xid) {
//			// err != nil: as for Decode. Otherwise c is Begin, then
//			// Insert (and Message) changes, then Commit with c.EndLSN,
//			// exactly as for a transaction sent whole.
//		}
//	}
//
// The Spool lives only as long as the process. That loses nothing: a
// streamed transaction is published only after its Stream Commit, and on
// the next connection PostgreSQL sends every transaction still in progress
// again from its first segment (the slot's restart_lsn stays before it).
// For the same reason a keepalive's WAL end may be confirmed between
// segments, and InTransaction reports false there.
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
