package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/event"
)

// Headers outboxd sets on every message. They are written after the row's
// own headers, so a row can never override them.
const (
	HeaderAggregateType = "Outbox-Aggregate-Type"
	HeaderAggregateID   = "Outbox-Aggregate-Id"
	HeaderEventType     = "Outbox-Event-Type"
	HeaderLSN           = "Outbox-Lsn" // the transaction's commit LSN
	HeaderXid           = "Outbox-Xid"
	HeaderCommitTime    = "Outbox-Commit-Time" // RFC 3339, UTC, nanoseconds
)

// Config configures a Publisher.
type Config struct {
	// Stream is the JetStream stream the messages must land in; every publish
	// carries Nats-Expected-Stream so a subject captured elsewhere is refused.
	Stream string
	// Subject renders each event's subject. Required.
	Subject *Template
	// DeadLetter, when set, is the subject a row that can never be
	// published goes to instead of stopping the pipeline; its headers name
	// the reason, the original subject, the row id, xid and LSN.
	DeadLetter string
	// Exclusive declares outboxd the only writer to Stream. Publishes then
	// carry Nats-Expected-Last-Sequence, which the stream leader checks
	// against every sequence it has assigned, so a message lost with a
	// failed leader makes the later ones fail instead of overtaking it.
	// Another writer to the stream makes those expectations fail, each
	// failure costing a retry round. Off by default.
	Exclusive bool
	// Fast publishes with JetStream fast-ingest batches instead of one
	// PublishAsync per message (see fast.go). The stream must take them:
	// check with CheckFastBatch. Not with Exclusive, whose expectations
	// need every message's own PubAck. Off by default.
	Fast bool
	// AckTimeout is how long fast mode waits for the server to acknowledge
	// a batch before it republishes. Default 10s.
	AckTimeout time.Duration
	// Linger is how long an open fast batch waits for the next item before
	// it commits: longer makes fewer, larger batches (less work for the
	// server and this process per message) and adds up to Linger to each
	// message's latency. Default 1ms.
	Linger time.Duration
	// LogPayloads logs each message's payload at debug level. Off by
	// default: payloads may hold personal data.
	LogPayloads bool
	// MaxInFlight bounds unacknowledged publishes. Default 4096.
	MaxInFlight int
	// RetryMin and RetryMax bound the backoff between republish rounds.
	// Defaults 100ms and 5s.
	RetryMin, RetryMax time.Duration
	// Logger receives state changes. Default zerolog.Nop().
	Logger zerolog.Logger
	// Observer is told every publish outcome, for metrics. Default none.
	Observer Observer
}

// Item is one event to publish with its sequence number from the ack tracker.
type Item struct {
	Seq   uint64
	Event *event.Event
	// Dead is set for a row the decoder could not turn into an event
	// (Event is nil then): it goes to the dead-letter subject.
	Dead *event.RowError
}

// acker receives acknowledgements in publish order (checkpoint.Tracker).
// An error means the sequence number was never handed out: a bug.
type acker interface {
	Ack(seq uint64) error
}

// Publisher publishes events to JetStream in order with a bounded window.
type Publisher struct {
	js         jetstream.JetStream
	cfg        Config
	maxPayload int64
	log        zerolog.Logger
	lastTx     txFields // Run's goroutine only
}

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

// NewPublisher checks cfg and returns a publisher on js. maxPayload is the
// server's max_payload (nats.Conn.MaxPayload), which headers count against.
//
// The connection under js must not buffer publishes while reconnecting
// (nats.ReconnectBufSize(-1)): the client would send the buffered, newer
// messages before the Publisher republishes the older ones lost with the
// old connection, and the stream would leave commit order.
func NewPublisher(js jetstream.JetStream, maxPayload int64, cfg Config) (*Publisher, error) {
	if cfg.Subject == nil {
		return nil, errors.New("BUG: sink.Config.Subject is nil")
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 4096
	}
	if cfg.MaxInFlight < 1 || cfg.MaxInFlight > 65536 {
		return nil, fmt.Errorf("sink: max in flight %d is out of range: use 1 to 65536", cfg.MaxInFlight)
	}
	if cfg.Fast && cfg.Exclusive {
		return nil, errors.New("sink: fast batch publishing cannot be combined with exclusive mode, whose Nats-Expected-Last-Sequence needs each message's own PubAck: use async publishing")
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 10 * time.Second
	}
	if cfg.RetryMin == 0 {
		cfg.RetryMin = 100 * time.Millisecond
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 5 * time.Second
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Publisher{js: js, cfg: cfg, maxPayload: maxPayload,
		log: cfg.Logger.With().Str("component", "sink").Str("stream", cfg.Stream).Logger()}, nil
}

// pending is a message published but not yet acknowledged.
type pending struct {
	seq    uint64
	msg    *nats.Msg
	future jetstream.PubAckFuture
	// committed is the event's commit time (zero for a dead letter), for
	// the commit-to-ack latency.
	committed time.Time
	// dead marks a dead-letter message, which may land in another stream.
	dead bool
	// Exclusive mode only: expect is the Nats-Expected-Last-Sequence the
	// message was sent with (0 for none).
	expect uint64
	// conn counts the client's reconnects when the message was sent: which
	// connection carried it.
	conn uint64
}

// Run publishes every item received on in, in order, and reports each
// acknowledgement to acks in the same order. When in is closed it waits for
// everything in flight and returns nil. It returns early with ctx's error
// when ctx is done, or with a *event.RowError for an event that cannot be
// published, once every message before that event is acknowledged.
func (p *Publisher) Run(ctx context.Context, in <-chan Item, acks acker) error {
	if p.cfg.Fast {
		return p.runFast(ctx, in, acks)
	}
	return p.runAsync(ctx, in, acks)
}

// runAsync is Run with PublishAsync: one PubAck per message. It sends
// first, built already, before anything from in (fast mode hands over a
// message when the stream refuses batches).
func (p *Publisher) runAsync(ctx context.Context, in <-chan Item, acks acker, first ...pending) error {
	var window queue
	// Exclusive mode only: redo holds built messages to send before
	// anything more from in (the tail of a recovered window, or a
	// dead-letter message waiting for the window to drain).
	var order sequencer
	var redo []pending
	// stalled is set once a publish was refused before it was sent: nothing
	// newer is sent until the window has recovered in order.
	var stalled bool
	var stop error // an item that cannot be published; Run returns it after the window
	for _, pm := range first {
		pm.conn = p.connection()
		pm.future = p.publish(pm.msg)
		stalled = stalled || isUnsent(pm)
		window.push(pm)
	}
	for in != nil || window.len() > 0 || len(redo) > 0 {
		// A failed head goes before any new publish: a message sent after
		// a reconnect must not overtake the ones lost with the old connection.
		if head := window.head(); head != nil {
			select {
			case err := <-head.future.Err():
				if rerr := p.retry(ctx, &window, &redo, &order, err); rerr != nil {
					return rerr
				}
				stalled = hasUnsent(window.items())
				continue
			default:
			}
		}
		if len(redo) > 0 {
			if window.len() < p.cfg.MaxInFlight && order.admits(window.len(), redo[0]) {
				window.push(p.sendExclusive(&order, redo[0]))
				redo[0] = pending{}
				redo = redo[1:]
				continue
			}
		}
		var recv <-chan Item
		if in != nil && len(redo) == 0 && window.len() < p.cfg.MaxInFlight &&
			(!p.cfg.Exclusive || order.known || window.len() == 0) &&
			(p.cfg.Exclusive || !stalled && !p.connChanged(&window)) {
			recv = in
		}
		var okC <-chan *jetstream.PubAck
		var errC <-chan error
		if head := window.head(); head != nil {
			okC, errC = head.future.Ok(), head.future.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case item, open := <-recv:
			if !open {
				in = nil
				continue
			}
			pm, err := p.prepare(item)
			if err != nil {
				// The messages before the bad one are still published:
				// take nothing more and return once they are acknowledged.
				stop, in = err, nil
				continue
			}
			if !p.cfg.Exclusive {
				pm.conn = p.connection()
				pm.future = p.publish(pm.msg)
				stalled = isUnsent(pm)
				window.push(pm)
				continue
			}
			if order.admits(window.len(), pm) {
				window.push(p.sendExclusive(&order, pm))
			} else {
				redo = append(redo, pm)
			}
		case ack := <-okC:
			head := window.pop()
			if p.cfg.Exclusive {
				order.acked(head, ack, p.cfg.Stream, window.len() == 0)
			}
			if err := p.acked(head, ack.Duplicate, acks); err != nil {
				return err
			}
		case err := <-errC:
			if rerr := p.retry(ctx, &window, &redo, &order, err); rerr != nil {
				return rerr
			}
			stalled = hasUnsent(window.items())
		}
	}
	return stop
}

// connection counts the client's reconnects, naming the connection a
// publish made now goes out on.
func (p *Publisher) connection() uint64 { return p.js.Conn().Stats().Reconnects }

// connChanged reports that the client has reconnected since the oldest
// message in the window was sent. That message may have died with the old
// connection without a word yet (its ack times out later), so a newer one
// sent on the new connection could be stored ahead of it: Run sends nothing
// until the window's older messages are acknowledged or have failed.
func (p *Publisher) connChanged(window *queue) bool {
	head := window.head()
	return head != nil && head.conn != p.connection()
}

// hasUnsent reports whether the window holds a message that was never sent
// (recover stopped before it).
func hasUnsent(window []pending) bool {
	for _, pm := range window {
		if isUnsent(pm) {
			return true
		}
	}
	return false
}

// prepare builds the message for an item, ready to send.
func (p *Publisher) prepare(item Item) (pending, error) {
	msg, err := p.build(item)
	if err != nil {
		return pending{}, err
	}
	if p.cfg.LogPayloads {
		p.log.Debug().Str("event_id", msg.Header.Get(jetstream.MsgIDHeader)).Str("subject", msg.Subject).
			Bytes("payload", msg.Data).Msg("publish")
	}
	pm := pending{seq: item.Seq, msg: msg, dead: msg.Subject == p.cfg.DeadLetter && isDeadLetter(msg)}
	if item.Event != nil {
		pm.committed = item.Event.Tx.CommitTime
	}
	return pm, nil
}

// acked reports the acknowledgement of pm to the observer and to acks.
func (p *Publisher) acked(pm pending, duplicate bool, acks acker) error {
	if duplicate {
		p.log.Debug().Str("event_id", pm.msg.Header.Get(jetstream.MsgIDHeader)).Msg("duplicate absorbed by JetStream")
	}
	if pm.dead {
		p.cfg.Observer.DeadLettered()
	} else {
		p.cfg.Observer.Published(pm.committed, duplicate)
	}
	if err := acks.Ack(pm.seq); err != nil {
		return fmt.Errorf("BUG: acknowledge message %d: %w", pm.seq, err)
	}
	return nil
}

// retry handles a failed head of the window. In exclusive mode only the
// head is republished in recover; the rest go back to redo, to be sent
// again by Run's rules (one at a time until a fresh sequence is known):
// any of them may already be stored, and an old expectation would be
// wrong for it.
func (p *Publisher) retry(ctx context.Context, window *queue, redo *[]pending, order *sequencer, cause error) error {
	p.cfg.Observer.PublishFailed(failureReason(cause))
	if !p.cfg.Exclusive {
		return p.recover(ctx, window.items(), cause)
	}
	items := window.items()
	if err := p.recoverExclusive(ctx, items, cause); err != nil {
		return err
	}
	rest := make([]pending, 0, len(items)-1+len(*redo))
	for _, pm := range items[1:] {
		pm.future, pm.expect = nil, 0
		rest = append(rest, pm)
	}
	*redo = append(rest, *redo...)
	window.truncate(1)
	order.known = false
	return nil
}

// publish sends msg asynchronously; a refusal before sending becomes a
// future that has already failed, so it takes the same retry path.
func (p *Publisher) publish(msg *nats.Msg) jetstream.PubAckFuture {
	future, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		return failedFuture{msg: msg, err: err}
	}
	return future
}

// recover handles a failed publish at the head of the window: it waits for
// every later publish to settle, then republishes the whole window in order
// (acknowledged repeats are duplicates JetStream drops), with backoff, until
// the head is acknowledged or ctx is done. It logs once when publishing
// stops and once when it resumes. It replaces the futures in place.
func (p *Publisher) recover(ctx context.Context, window []pending, cause error) error {
	p.log.Warn().Err(cause).Int("in_flight", len(window)).Msg("publish failed; retrying from the first unacknowledged message")
	delay := p.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		settle(ctx, window[1:])
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, p.cfg.RetryMax)
		p.republish(window)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-window[0].future.Ok():
			// Futures deliver once: leave one that reports the ack again.
			window[0].future = ackedFuture{msg: window[0].msg}
			p.log.Info().Int("attempts", attempt).Msg("publishing resumed")
			return nil
		case err := <-window[0].future.Err():
			p.cfg.Observer.PublishFailed(failureReason(err))
			p.log.Debug().Err(err).Int("attempt", attempt).Msg("republish failed")
		}
	}
}

// errNotSent fails the messages republish did not send.
var errNotSent = errors.New("not sent: an earlier message of the window could not be")

// republish sends the window again in order on one connection. It stops at
// the first message the client refuses, or when the client reconnects
// under it, and leaves the rest unsent (failed futures): a message sent on
// a new connection must not overtake one that failed or went out on the
// old one. Run republishes those later, from the first of them.
func (p *Publisher) republish(window []pending) {
	conn := p.connection()
	for i := range window {
		if i > 0 && (p.connection() != conn || isUnsent(window[i-1])) {
			for j := i; j < len(window); j++ {
				window[j].future = failedFuture{msg: window[j].msg, err: errNotSent}
			}
			return
		}
		window[i].conn = conn
		window[i].future = p.publish(window[i].msg)
	}
}

func isUnsent(pm pending) bool {
	_, unsent := pm.future.(failedFuture)
	return unsent
}

// settle waits until every future has an outcome, so a republish cannot
// race a late acknowledgement of the same message.
func settle(ctx context.Context, window []pending) {
	for _, pm := range window {
		select {
		case <-pm.future.Ok():
		case <-pm.future.Err():
		case <-ctx.Done():
			return
		}
	}
}

// build makes the message for an item: the event's own, or, for a row that
// can never be published, a dead-letter message when a dead-letter subject
// is set (else the row's *event.RowError).
func (p *Publisher) build(item Item) (*nats.Msg, error) {
	dead := item.Dead
	if dead == nil {
		msg, err := p.message(item.Event)
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

// failedFuture stands for a publish the client refused before sending.
type failedFuture struct {
	msg *nats.Msg
	err error
}

func (f failedFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (f failedFuture) Err() <-chan error {
	c := make(chan error, 1)
	c <- f.err
	return c
}
func (f failedFuture) Msg() *nats.Msg { return f.msg }

// ackedFuture stands for a publish already acknowledged, with ack when it
// is kept (exclusive mode reads its sequence).
type ackedFuture struct {
	msg *nats.Msg
	ack *jetstream.PubAck
}

func (f ackedFuture) Ok() <-chan *jetstream.PubAck {
	c := make(chan *jetstream.PubAck, 1)
	if f.ack == nil {
		c <- &jetstream.PubAck{}
	} else {
		c <- f.ack
	}
	return c
}
func (f ackedFuture) Err() <-chan error { return nil }
func (f ackedFuture) Msg() *nats.Msg    { return f.msg }

// queue is the in-flight window, oldest first. Popping from the front and
// appending at the back reuse one backing array.
type queue struct {
	buf   []pending
	start int
}

func (q *queue) len() int { return len(q.buf) - q.start }

func (q *queue) head() *pending {
	if q.len() == 0 {
		return nil
	}
	return &q.buf[q.start]
}

func (q *queue) push(pm pending) {
	if q.start > 0 && len(q.buf) == cap(q.buf) {
		n := copy(q.buf, q.buf[q.start:])
		clear(q.buf[n:])
		q.buf, q.start = q.buf[:n], 0
	}
	q.buf = append(q.buf, pm)
}

func (q *queue) pop() pending {
	pm := q.buf[q.start]
	q.buf[q.start] = pending{}
	q.start++
	if q.start == len(q.buf) {
		q.buf, q.start = q.buf[:0], 0
	}
	return pm
}

// truncate keeps the n oldest messages.
func (q *queue) truncate(n int) {
	clear(q.buf[q.start+n:])
	q.buf = q.buf[:q.start+n]
}

// items is the window as a slice, to update futures in place.
func (q *queue) items() []pending { return q.buf[q.start:] }
