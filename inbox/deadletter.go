package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxReason bounds the reason header: a handler's error can be long.
const maxReason = 1024

// deadLetter stores m on the dead-letter subject with the reason and
// where it came from, then terminates the original, so that it is never
// delivered again. Until the dead letter is stored the original stays: a
// failed publish naks it for a later try. Its Nats-Msg-Id is the
// consumer's name and the message id, so that a second try (the term
// lost in a crash) is dropped by the dead-letter stream.
func (w worker) deadLetter(ctx context.Context, msg jetstream.Msg, m Message, log *slog.Logger, reason string) {
	dl := &nats.Msg{Subject: w.cfg.DeadLetter, Header: nats.Header{}, Data: m.Data}
	for k, v := range m.Header {
		// Nats-* headers steer the server (Nats-Expected-*, TTLs): a copy
		// would apply them to the dead letter.
		if !strings.HasPrefix(strings.ToLower(k), "nats-") {
			dl.Header[k] = append([]string(nil), v...)
		}
	}
	id := w.cfg.Name + ":" + m.ID
	if m.ID == "" {
		id = fmt.Sprintf("%s:%s:%d", w.cfg.Name, m.Stream, m.Sequence)
	}
	dl.Header.Set(jetstream.MsgIDHeader, id)
	dl.Header.Set(HeaderDeadLetterReason, headerValue(reason))
	dl.Header.Set(HeaderOriginalSubject, m.Subject)
	dl.Header.Set(HeaderConsumer, w.cfg.Name)
	dl.Header.Set(HeaderStream, m.Stream)
	dl.Header.Set(HeaderSequence, strconv.FormatUint(m.Sequence, 10))
	dl.Header.Set(HeaderDeliveries, strconv.FormatUint(m.Delivery, 10))
	if _, err := w.js.PublishMsg(ctx, dl); err != nil {
		delay := w.cfg.delay(m.Delivery)
		log.Error("dead letter not stored; the message will be delivered again", "error", err, "reason", reason, "retry_in", delay)
		nak(log, msg, delay)
		return
	}
	log.Error("message dead-lettered", "reason", reason, "dead_letter", w.cfg.DeadLetter)
	if err := msg.TermWithReason("dead-lettered to " + w.cfg.DeadLetter); err != nil {
		log.Warn("term failed; the message will be delivered and dead-lettered again (the copy is deduplicated)", "error", err)
	}
}

// headerValue makes s fit a header: one line, bounded.
func headerValue(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxReason {
		cut := maxReason
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
