package natsconn

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// permissionsRe finds the operation and subject in the server's
// permissions violation: `Permissions Violation for Publish to "x.y"`.
var permissionsRe = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to "([^"]+)"`)

// permissionLog logs each NATS permissions violation once per state
// change: the first refusal of an operation on a subject, and again after
// a reconnect (the operator may have fixed the permissions) or a minute
// later if it is still refused. The sink keeps retrying a refused publish;
// this is what tells the operator why nothing is confirmed past it.
type permissionLog struct {
	log zerolog.Logger
	now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // "publish outbox.x" → last logged
}

func newPermissionLog(log zerolog.Logger) *permissionLog {
	return &permissionLog{log: log, now: time.Now, seen: map[string]time.Time{}}
}

// handle is a nats.ErrorHandler.
func (p *permissionLog) handle(_ *nats.Conn, sub *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		ev := p.log.Warn().Err(err)
		if sub != nil {
			ev = ev.Str("subscription", sub.Subject)
		}
		ev.Msg("NATS reported an error")
		return
	}
	op, subject := "", ""
	if m := permissionsRe.FindStringSubmatch(err.Error()); m != nil {
		op, subject = strings.ToLower(m[1]), m[2]
	}
	if op == "subscription" {
		op = "subscribe"
	}
	key := op + " " + subject
	p.mu.Lock()
	last, ok := p.seen[key]
	now := p.now()
	if ok && now.Sub(last) < time.Minute {
		p.mu.Unlock()
		return
	}
	p.seen[key] = now
	p.mu.Unlock()
	if subject == "" {
		p.log.Error().Err(err).Msg("permissions violation: the NATS user lacks a permission outboxd needs; nothing is confirmed past the refused message")
		return
	}
	ev := p.log.Error().Str("permission", op).Str("subject", subject)
	if op == "publish" {
		ev.Msgf("permissions violation for publish to %s: the NATS user may not publish to this subject; outboxd retries, and confirms nothing past an event it cannot publish, until the permission is granted", subject)
		return
	}
	ev.Msgf("permissions violation for %s to %s: the NATS user lacks this permission", op, subject)
}

// reset forgets what was logged, so a violation after a reconnect is
// logged again.
func (p *permissionLog) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.seen)
}
