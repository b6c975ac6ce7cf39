package decoder

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"

	"github.com/outboxd/outboxd/event"
)

// LogicalMessage is a logical decoding message, written on the server with
// pg_logical_emit_message and sent by pgoutput when the replication option
// messages is 'true'.
type LogicalMessage struct {
	// Transactional messages are part of their transaction: they arrive
	// between its Begin and Commit (or in its Replay) only if it commits.
	// The others arrive as soon as they are written, outside any
	// transaction, whether or not the writer commits.
	Transactional bool
	// LSN is the WAL position of the message.
	LSN pglogrepl.LSN
	// Prefix is the message's prefix, which says who it is for.
	Prefix string
	// Content is the message's payload. It aliases the bytes passed to
	// Decoder.Decode (or read by Replay).
	Content []byte
}

// parseMessage reads a Message body in protocol version 1 form (no xid).
func parseMessage(body []byte) (*LogicalMessage, error) {
	r := reader{b: body}
	flags := r.u8("flags")
	lsn := r.u64("message lsn")
	prefix := r.cstring("prefix")
	n := r.u32("content length")
	if r.short != "" {
		return nil, r.check("message")
	}
	if uint64(n) > uint64(r.remaining()) {
		r.short = "content"
		return nil, r.check("message")
	}
	content := r.bytes(int(n), "content")
	if err := r.check("message"); err != nil {
		return nil, err
	}
	if flags&^1 != 0 {
		return nil, malformed("message: unknown flags %#x", flags)
	}
	return &LogicalMessage{
		Transactional: flags == 1,
		LSN:           pglogrepl.LSN(lsn),
		Prefix:        string(prefix),
		Content:       content,
	}, nil
}

// decodeMessage turns a Message outside a stream segment into a Change.
func (d *Decoder) decodeMessage(body []byte) (Change, error) {
	m, err := parseMessage(body)
	if err != nil {
		return Change{}, err
	}
	if !d.wants(m) {
		return Change{}, nil
	}
	if m.Transactional && !d.inTx {
		return Change{}, malformed("transactional message with prefix %q outside a transaction", m.Prefix)
	}
	if d.carriesEvent(m) {
		return d.messageEvent(m)
	}
	if !m.Transactional {
		return Change{Kind: Message, Message: m}, nil
	}
	return Change{Kind: Message, Tx: d.tx, Message: m}, nil
}

// wants reports whether m decodes to anything but None.
func (d *Decoder) wants(m *LogicalMessage) bool {
	return d.messages || d.carriesEvent(m)
}

// carriesEvent reports whether m has the event prefix.
func (d *Decoder) carriesEvent(m *LogicalMessage) bool {
	return d.envelope != "" && m.Prefix == d.envelope
}

// messageEvent turns a message with the event prefix into an Insert, or a
// *RowError when it cannot be published.
func (d *Decoder) messageEvent(m *LogicalMessage) (Change, error) {
	env, err := event.ParseEnvelope(m.Content)
	if m.Transactional {
		d.events++
	}
	rowErr := func(column, reason string) *event.RowError {
		id := env.ID
		if id != "" {
			id = d.idPrefix + id
		}
		e := &event.RowError{EventID: id, LSN: m.LSN, Column: column, Reason: reason, Message: true, Content: bytes.Clone(m.Content)}
		if m.Transactional {
			e.Xid, e.Ordinal = d.tx.Xid, d.events
		}
		return e
	}
	if !m.Transactional {
		// Sent as soon as it is written, commit or not: publishing it
		// could publish an event of a transaction that rolled back.
		return Change{}, rowErr("", fmt.Sprintf("was emitted with transactional = false: it is sent even if its transaction rolls back, so outboxd does not publish it; emit it with pg_logical_emit_message(true, %q, ...) or outbox_emit_message(...)", d.envelope))
	}
	var envErr *event.EnvelopeError
	if errors.As(err, &envErr) {
		return Change{}, rowErr(envErr.Key, envErr.Reason)
	}
	if err != nil {
		return Change{}, err
	}
	ev := env.Event(d.tx, m.LSN)
	ev.ID = d.idPrefix + ev.ID
	return Change{Kind: Insert, Tx: d.tx, Event: ev}, nil
}
