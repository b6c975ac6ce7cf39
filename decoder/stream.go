package decoder

import (
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/jackc/pglogrepl"

	"github.com/outboxd/outboxd/event"
)

// This file handles pgoutput protocol version 2 streaming. PostgreSQL
// streams a transaction that outgrows logical_decoding_work_mem before it
// commits, in segments: Stream Start (xid, first-segment flag), changes
// that carry the xid of their (sub)transaction after the type byte, Stream
// Stop. Segments of several transactions, and whole transactions sent as
// Begin…Commit, alternate; each transaction ends with Stream Commit or
// Stream Abort. The Decoder writes the segments' changes to its Spool in
// protocol version 1 form and, after Stream Commit, Replay decodes them
// with the same code as a transaction sent whole.

// committedStream is a Stream Commit waiting for Replay.
type committedStream struct {
	tx     event.TxInfo
	endLSN pglogrepl.LSN
	spool  *spoolTx // nil when nothing was streamed for it
}

func (d *Decoder) decodeStreamStart(body []byte) (Change, error) {
	r := reader{b: body}
	xid := r.u32("xid")
	first := r.u8("first segment flag")
	if err := r.check("stream start"); err != nil {
		return Change{}, err
	}
	if first > 1 {
		return Change{}, malformed("stream start of xid %d: first segment flag %d, want 0 or 1", xid, first)
	}
	if d.inTx {
		return Change{}, malformed("stream start of xid %d inside transaction xid %d", xid, d.tx.Xid)
	}
	if d.spool.inSegment() {
		return Change{}, malformed("stream start of xid %d inside the stream segment of xid %d", xid, d.spool.segmentXid())
	}
	return Change{}, d.spool.startSegment(xid, first == 1)
}

func (d *Decoder) decodeStreamStop(body []byte) (Change, error) {
	if len(body) != 0 {
		return Change{}, malformed("stream stop: %d unexpected bytes after the end of the message", len(body))
	}
	if !d.spool.inSegment() {
		return Change{}, malformed("stream stop without stream start")
	}
	return Change{}, d.spool.stopSegment()
}

func (d *Decoder) decodeStreamCommit(body []byte) (Change, error) {
	r := reader{b: body}
	xid := r.u32("xid")
	r.u8("flags")
	commitLSN := r.u64("commit lsn")
	endLSN := r.u64("end lsn")
	ts := r.u64("commit time")
	if err := r.check("stream commit"); err != nil {
		return Change{}, err
	}
	if err := d.outsideStreams("stream commit", xid); err != nil {
		return Change{}, err
	}
	// An xid never streamed is an empty transaction rather than an error:
	// it replays as Begin and Commit, whose end LSN the caller confirms.
	p := &committedStream{
		tx:     event.TxInfo{Xid: xid, CommitLSN: pglogrepl.LSN(commitLSN), CommitTime: pgTime(int64(ts))},
		endLSN: pglogrepl.LSN(endLSN),
		spool:  d.spool.take(xid),
	}
	d.pending = p
	return Change{Kind: StreamCommit, Tx: p.tx, EndLSN: p.endLSN}, nil
}

func (d *Decoder) decodeStreamAbort(body []byte) (Change, error) {
	r := reader{b: body}
	xid := r.u32("xid")
	subxid := r.u32("subtransaction xid")
	if err := r.check("stream abort"); err != nil {
		return Change{}, err
	}
	if err := d.outsideStreams("stream abort", xid); err != nil {
		return Change{}, err
	}
	return Change{}, d.spool.abort(xid, subxid)
}

// outsideStreams rejects a Stream Commit or Abort where the server never
// sends one: inside a transaction or a stream segment.
func (d *Decoder) outsideStreams(what string, xid uint32) error {
	if d.inTx {
		return malformed("%s of xid %d inside transaction xid %d", what, xid, d.tx.Xid)
	}
	if d.spool.inSegment() {
		return malformed("%s of xid %d inside the stream segment of xid %d", what, xid, d.spool.segmentXid())
	}
	return nil
}

// decodeInStream handles a message between Stream Start and Stream Stop.
// Changes are checked, so that a broken stream fails where it breaks, but
// only spooled when replay can yield something from them: Relation
// messages, Inserts into the outbox table and (with Config.Messages)
// transactional logical messages.
func (d *Decoder) decodeInStream(walStart pglogrepl.LSN, data []byte) (Change, error) {
	typ := data[0]
	switch typ {
	case 'O':
		// Origin follows Stream Start without an xid.
		return Change{}, nil
	case 'R', 'I', 'M', 'U', 'D', 'T', 'Y':
	default:
		return Change{}, malformed("%q message inside the stream segment of xid %d", typ, d.spool.segmentXid())
	}
	r := reader{b: data[1:]}
	subxid := r.u32("xid")
	if r.short != "" {
		return Change{}, r.check(fmt.Sprintf("streamed %q message", typ))
	}
	body := data[1+r.off:]
	switch typ {
	case 'R':
		// The cache takes the layout now, so that the Inserts after it are
		// checked against it, and the spool keeps it in order for replay,
		// where it is decoded again: other transactions' Relation messages
		// may replace the cache entry in between. A schema error waits for
		// replay, as the transaction may yet abort.
		rel, err := d.cacheRelation(body)
		if err != nil {
			return Change{}, err
		}
		return Change{}, d.spool.appendRelation(subxid, walStart, rel)
	case 'I':
		var ins insertTuple
		if err := d.parseInsert(body, false, &ins); err != nil {
			return Change{}, err
		}
		rel := ins.rel
		if rel.err == nil && ins.n != len(rel.cols) {
			return Change{}, malformed("insert into %s.%s: %d columns, its Relation message has %d", rel.namespace, rel.name, ins.n, len(rel.cols))
		}
		if !rel.outbox && !rel.partition {
			return Change{}, nil
		}
		// Mapping and partition errors wait for replay, with the rest of
		// the row.
		if err := d.spool.appendRelation(subxid, walStart, rel); err != nil {
			return Change{}, err
		}
		return Change{}, d.spool.append(subxid, walStart, typ, body)
	case 'M':
		m, err := parseMessage(body)
		if err != nil {
			return Change{}, err
		}
		switch {
		case !d.wants(m):
			return Change{}, nil
		case !m.Transactional && d.carriesEvent(m):
			return d.messageEvent(m)
		case !m.Transactional:
			// Not part of the transaction: it is due now. (pgoutput sends
			// these outside stream segments; this is for safety only.)
			return Change{Kind: Message, Message: m}, nil
		}
		return Change{}, d.spool.append(subxid, walStart, typ, body)
	}
	// Update, Delete, Truncate and Type carry nothing outboxd publishes.
	return Change{}, nil
}

// Replay yields the streamed transaction whose Stream Commit Decode just
// returned, from the Spool's file, exactly as Decode yields a transaction
// sent whole: Begin, then each outbox Insert (Change.Event, with Tx from the
// Stream Commit and Event.LSN the WAL start of the streamed message) and
// transactional Message in the order the server sent them (changes of
// aborted subtransactions left out), then Commit with the end LSN. It reads
// the file as it goes: memory does not grow with the transaction.
//
// A pair with a non-nil error carries a *RowError or *SchemaError for one
// change (the caller may stop or go on, as after the same error from
// Decode), or, as the last pair, an error wrapping ErrMalformed, a spool
// file error, or one saying xid is not the transaction waiting for replay.
//
// The transaction leaves the Spool (its file is removed) when Replay has
// read it all, just before yielding Commit. A caller that stops the loop
// earlier leaves it waiting: Replay starts it over, or Discard drops it.
// Decode refuses other messages until then. Replay must not be called
// from inside its own loop.
func (d *Decoder) Replay(xid uint32) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		p := d.pending
		switch {
		case d.replaying:
			yield(Change{}, fmt.Errorf("replay xid %d: a replay is already running", xid))
			return
		case p == nil || p.tx.Xid != xid:
			yield(Change{}, fmt.Errorf("replay xid %d: no Stream Commit of that xid is waiting for replay", xid))
			return
		}
		d.replaying = true
		d.begin(p.tx)
		defer func() {
			d.replaying = false
			d.inTx, d.tx = false, event.TxInfo{}
		}()

		if !yield(Change{Kind: Begin, Tx: p.tx}, nil) {
			return
		}
		if p.spool != nil {
			ok, err := d.replayRecords(p.spool, yield)
			if err != nil {
				yield(Change{}, err)
				return
			}
			if !ok {
				return
			}
		}
		d.pending = nil
		if err := d.spool.remove(p.spool); err != nil {
			yield(Change{}, err)
			return
		}
		yield(Change{Kind: Commit, Tx: p.tx, EndLSN: p.endLSN}, nil)
	}
}

// replayRecords yields the changes of tx's file. ok is false when the
// caller stopped.
func (d *Decoder) replayRecords(tx *spoolTx, yield func(Change, error) bool) (ok bool, err error) {
	sr, err := d.spool.reader(tx)
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := sr.close(); cerr != nil && err == nil {
			err = fmt.Errorf("spool xid %d: %w", tx.xid, cerr)
		}
	}()
	var buf []byte
	for {
		rec, err := sr.next(buf)
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		buf = rec.msg
		ch, err := d.decodeRecord(rec)
		if err != nil {
			if !changeError(err) {
				return false, fmt.Errorf("replay xid %d: record at %s: %w", tx.xid, rec.walStart, err)
			}
			if !yield(Change{}, err) {
				return false, nil
			}
			continue
		}
		if ch.Kind == None {
			continue
		}
		// The change aliases the record: the next one needs a new buffer.
		buf = nil
		if !yield(ch, nil) {
			return false, nil
		}
	}
}

// changeError reports whether err is about one change (a row or the
// table's layout) rather than the stream.
func changeError(err error) bool {
	var re *event.RowError
	var se *SchemaError
	return errors.As(err, &re) || errors.As(err, &se)
}

// decodeRecord decodes one spooled record: only what decodeInStream
// spools can be in the file.
func (d *Decoder) decodeRecord(rec spoolRecord) (Change, error) {
	switch rec.msg[0] {
	case 'R', 'I', 'M':
		return d.decodeV1(rec.walStart, rec.msg)
	}
	return Change{}, malformed("spooled %q message", rec.msg[0])
}

// Discard drops the streamed transaction whose Stream Commit Decode just
// returned, without reading it: for a caller that skips the transaction
// (one published before the checkpoint, say). It fails when xid is not the
// transaction waiting for replay, or its file cannot be removed.
func (d *Decoder) Discard(xid uint32) error {
	p := d.pending
	if d.replaying {
		return fmt.Errorf("discard xid %d: a replay is running", xid)
	}
	if p == nil || p.tx.Xid != xid {
		return fmt.Errorf("discard xid %d: no Stream Commit of that xid is waiting for replay", xid)
	}
	d.pending = nil
	return d.spool.remove(p.spool)
}
