package sink

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/event"
)

// This file builds the messages: an event's own, or a dead letter for a
// row that can never be published, with outboxd's headers.

// Headers outboxd sets on every message. They are written after the row's
// own headers, so a row can never override them.
const (
	HeaderAggregateType = "Outbox-Aggregate-Type"
	HeaderAggregateID   = "Outbox-Aggregate-Id"
	HeaderEventType     = "Outbox-Event-Type"
	HeaderLSN           = "Outbox-Lsn" // the transaction's commit LSN
	HeaderXid           = "Outbox-Xid"
	HeaderCommitTime    = "Outbox-Commit-Time" // RFC 3339, UTC, nanoseconds
	// HeaderNullPayload is "true" on the message of a row whose payload
	// column is NULL, published with an empty body (--null-payload
	// empty): it tells such a row from one with an empty payload.
	HeaderNullPayload = "Outbox-Null-Payload"
)

// txFields are the header values every event of one transaction shares,
// formatted once per transaction rather than once per event.
type txFields struct {
	tx                   event.TxInfo
	lsn, xid, commitTime string
}

// fields returns the header values of tx, formatting them only when tx is
// not the transaction of the previous call.
func (f *txFields) fields(tx event.TxInfo) *txFields {
	if f.lsn != "" && f.tx.CommitLSN == tx.CommitLSN && f.tx.Xid == tx.Xid && f.tx.CommitTime.Equal(tx.CommitTime) {
		return f
	}
	*f = txFields{tx: tx, lsn: tx.CommitLSN.String(), xid: strconv.FormatUint(uint64(tx.Xid), 10),
		commitTime: tx.CommitTime.UTC().Format(time.RFC3339Nano)}
	return f
}

// build makes the message for an item: the event's own, or, for a row that
// can never be published, a dead-letter message when a dead-letter subject
// is set (else the row's *event.RowError).
func (p *Publisher) build(item Item) (*nats.Msg, error) {
	dead := item.Dead
	if dead == nil {
		msg, err := p.message(item.Event)
		if err == nil && item.split != "" {
			msg.Header.Set(HeaderTxSplit, item.split)
		}
		if !errors.As(err, &dead) || p.cfg.DeadLetter == "" {
			return msg, err
		}
	}
	if p.cfg.DeadLetter == "" {
		return nil, dead
	}
	p.log.Warn().Str("event_id", dead.EventID).Uint32("xid", dead.Xid).Str("lsn", dead.LSN.String()).
		Str("subject", p.cfg.DeadLetter).Str("reason", dead.Reason).Msg("row dead-lettered")
	return p.deadLetter(item.Event, dead), nil
}

// Headers of a dead-letter message, beside the row's Outbox-* ones.
const (
	HeaderDeadLetterReason = "Outbox-Dead-Letter-Reason"
	HeaderOriginalSubject  = "Outbox-Original-Subject"
	HeaderID               = "Outbox-Id"
	HeaderColumn           = "Outbox-Column"
	HeaderBodyDropped      = "Outbox-Dead-Letter-Body-Dropped"
)

// DeadLetterHeaderRoom bounds the encoded headers of a dead letter beside
// its Nats-Msg-Id (each of their values is cut at 1 KiB): a dead letter
// keeps its body whenever body + Nats-Msg-Id + DeadLetterHeaderRoom fit
// under max_payload. Retention keeps the rows for which they may not.
const DeadLetterHeaderRoom = 8 << 10

// deadLetter builds the dead-letter message for a row. ev is nil when the
// decoder could not make an event of the row; dead.Row then holds what it
// could read. The body is the payload as written (for a message that is
// no valid envelope, its whole content), dropped only when it does not fit
// under max_payload, and HeaderBodyDropped then says why.
func (p *Publisher) deadLetter(ev *event.Event, dead *event.RowError) *nats.Msg {
	id := dead.EventID
	if id == "" {
		// Rows of one multi-row insert share xid and LSN: the ordinal
		// keeps their dead letters apart (one id would drop all but one
		// as duplicates), and is the same on every replay.
		id = fmt.Sprintf("outboxd-dead-letter-%d-%s-%d", dead.Xid, dead.LSN, dead.Ordinal)
	}
	h := nats.Header{
		jetstream.MsgIDHeader:  {id},
		HeaderDeadLetterReason: {headerValue(dead.Error())},
		HeaderID:               {headerValue(dead.EventID)},
		HeaderColumn:           {headerValue(dead.Column)},
		HeaderXid:              {strconv.FormatUint(uint64(dead.Xid), 10)},
		HeaderLSN:              {dead.LSN.String()},
	}
	if ev == nil {
		ev = dead.Row
	}
	var body []byte
	if ev != nil {
		if subject, ok := p.cfg.Subject.renderAsWritten(ev); ok {
			h[HeaderOriginalSubject] = []string{headerValue(subject)}
		}
		setField(h, HeaderAggregateType, headerValue(ev.AggregateType))
		setField(h, HeaderAggregateID, headerValue(ev.AggregateID))
		setField(h, HeaderEventType, headerValue(ev.EventType))
		h[HeaderCommitTime] = []string{ev.Tx.CommitTime.UTC().Format(time.RFC3339Nano)}
		setField(h, HeaderNullPayload, nullPayload(ev))
		body = ev.Payload
	} else if dead.Content != nil {
		// A message that is not a valid envelope: its content exists
		// nowhere else.
		body = dead.Content
	}
	if size := int64(len(body)) + headerSize(h) + 64; p.maxPayload > 0 && size > p.maxPayload {
		h[HeaderBodyDropped] = []string{fmt.Sprintf("the body of %d bytes with these headers does not fit under the server's max_payload of %d bytes; the row keeps it",
			len(body), p.maxPayload)}
		body = nil
	}
	return &nats.Msg{Subject: p.cfg.DeadLetter, Header: h, Data: body}
}

// isDeadLetter reports whether msg was built by deadLetter.
func isDeadLetter(msg *nats.Msg) bool {
	_, ok := msg.Header[HeaderDeadLetterReason]
	return ok
}

// setField sets one of outboxd's own field headers, or removes it when the
// field is empty (not mapped, or NULL): a header without a value tells a
// consumer nothing, and removing it also drops a row header of that name,
// which may not stand in for outboxd's.
func setField(h nats.Header, key, value string) {
	if value == "" {
		delete(h, key)
		return
	}
	h[key] = []string{value}
}

// nullPayload is HeaderNullPayload's value for ev: "true", or "" for no
// header.
func nullPayload(ev *event.Event) string {
	if ev.NullPayload {
		return "true"
	}
	return ""
}

// fieldValues hands out one-value header slices from one backing array, so
// a message's headers cost one allocation instead of one each. Each slice
// is capped at its one value: an append to it copies instead of
// overwriting the next header's value.
type fieldValues []string

func (f *fieldValues) one(v string) []string {
	*f = append(*f, v)
	n := len(*f)
	return (*f)[n-1 : n : n]
}

// headerValue makes s safe as a header value: control characters (which
// would end the header line) become spaces, and it is cut at 1 KiB.
func headerValue(s string) string {
	if len(s) > 1024 {
		s = s[:1024]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// message builds the NATS message for an event, or a *event.RowError for
// an event that can never be published as it is (retrying cannot help).
func (p *Publisher) message(ev *event.Event) (*nats.Msg, error) {
	rowErr := func(column, reason string) error {
		return &event.RowError{EventID: ev.ID, Xid: ev.Tx.Xid, LSN: ev.LSN, Column: column, Reason: reason, Message: ev.FromMessage}
	}
	subject, err := p.cfg.Subject.Render(ev)
	var placeholder *PlaceholderError
	if errors.As(err, &placeholder) {
		return nil, rowErr(placeholder.Column, "cannot fill subject placeholder {"+placeholder.Column+"}: "+placeholder.Problem)
	}
	if err != nil {
		return nil, err
	}
	h := make(nats.Header, len(ev.Headers)+8)
	vals := make(fieldValues, 0, len(ev.Headers)+8)
	for _, kv := range ev.Headers {
		// Nats-* headers steer JetStream (dedupe, expectations, rollups,
		// TTLs): a row may not set them.
		if len(kv.Key) >= 5 && strings.EqualFold(kv.Key[:5], "Nats-") {
			continue
		}
		if kv.Key == HeaderNullPayload {
			continue // outboxd's own, set below for a NULL payload only
		}
		if err := event.CheckHeader(kv.Key, kv.Value); err != nil {
			return nil, rowErr("headers", "has "+err.Error())
		}
		h[kv.Key] = vals.one(kv.Value)
	}
	h[jetstream.MsgIDHeader] = vals.one(ev.ID)
	h[jetstream.ExpectedStreamHeader] = vals.one(p.cfg.Stream)
	for _, f := range [...]struct{ key, value string }{
		{HeaderAggregateType, ev.AggregateType}, {HeaderAggregateID, ev.AggregateID}, {HeaderEventType, ev.EventType},
	} {
		if f.value == "" {
			delete(h, f.key) // a row's own header of that name must not stand in
			continue
		}
		h[f.key] = vals.one(f.value)
	}
	if ev.NullPayload {
		h[HeaderNullPayload] = vals.one("true")
	}
	tx := p.lastTx.fields(ev.Tx)
	h[HeaderLSN] = vals.one(tx.lsn)
	h[HeaderXid] = vals.one(tx.xid)
	h[HeaderCommitTime] = vals.one(tx.commitTime)

	if size := int64(len(ev.Payload)) + headerSize(h); p.maxPayload > 0 && size > p.maxPayload {
		return nil, rowErr("payload", fmt.Sprintf("makes a message of %d bytes (payload %d + headers) exceeds the server's max_payload of %d bytes; raise max_payload on the NATS server or make the payload smaller",
			size, len(ev.Payload), p.maxPayload))
	}
	return &nats.Msg{Subject: subject, Header: h, Data: ev.Payload}, nil
}

// headerSize is the encoded size of h: "NATS/1.0\r\n", "Key: Value\r\n"
// per value, and the closing "\r\n".
func headerSize(h nats.Header) int64 {
	n := int64(len("NATS/1.0\r\n") + 2)
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}
