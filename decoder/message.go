package decoder

import (
	"github.com/jackc/pglogrepl"
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
	if !m.Transactional {
		return Change{Kind: Message, Message: m}, nil
	}
	if !d.inTx {
		return Change{}, malformed("transactional message with prefix %q outside a transaction", m.Prefix)
	}
	return Change{Kind: Message, Tx: d.tx, Message: m}, nil
}
