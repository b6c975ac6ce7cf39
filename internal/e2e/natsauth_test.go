package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/outboxd/outboxd/internal/testenv/checker"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

const (
	adminPassword   = "admin-Secret-0"
	outboxdPassword = "outboxd-Secret-7f3a"
	outboxdToken    = "outboxd-Token-9c1e"
)

// adminUser is the first user, the one natstest's Conn (and so e.js())
// logs in as.
var adminUser = &server.User{Username: "admin", Password: adminPassword}

// outboxdPermissions is the least a NATS user needs to run outboxd with
// the default kv:outboxd checkpoint, stream OUTBOX and --create-stream,
// publishing to subjects under publish. Each entry was checked by taking it
// away: without it outboxd does not start or never confirms a row. The two
// CREATE subjects are needed only while the stream and the bucket do not
// exist yet, MSG.GET only for the stream check.
func outboxdPermissions(publish ...string) *server.Permissions {
	allow := []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO.OUTBOX",
		"$JS.API.STREAM.CREATE.OUTBOX",
		"$JS.API.STREAM.MSG.GET.OUTBOX",
		"$JS.API.STREAM.INFO.KV_outboxd",
		"$JS.API.STREAM.CREATE.KV_outboxd",
		"$JS.API.DIRECT.GET.KV_outboxd.>",
		"$KV.outboxd.>",
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append(allow, publish...)},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}
}

// noSecrets fails if out shows a password or token.
func noSecrets(t *testing.T, out string) {
	t.Helper()
	for _, secret := range []string{adminPassword, outboxdPassword, outboxdToken} {
		if strings.Contains(out, secret) {
			t.Errorf("output shows a secret (%d bytes): %s", len(secret), tail(out, 20))
		}
	}
}

// TestNATSTLSUserPassword: over TLS with a user and password (the password
// from OUTBOXD_NATS_PASSWORD) outboxd streams end to end; a CA that did
// not sign the server's certificate and a wrong password stop it with an
// error that says so.
func TestNATSTLSUserPassword(t *testing.T) {
	ca := natstest.NewCA(t)
	e := newEnv(t, pgtest.Shared(t), true, natstest.WithTLS(t, ca, false),
		natstest.WithUsers(adminUser, &server.User{Username: "outboxd", Password: outboxdPassword}))

	t.Run("wrong CA", func(t *testing.T) {
		e := *e
		e.t = t
		out := e.expectExit(e.args("--nats-tls-ca", natstest.NewCA(t).File, "--nats-user", "outboxd", "--nats-password", outboxdPassword),
			"connect to NATS", "x509: certificate signed by unknown authority")
		noSecrets(t, out)
	})
	t.Run("no CA", func(t *testing.T) {
		e := *e
		e.t = t
		e.expectExit(e.args("--nats-user", "outboxd", "--nats-password", outboxdPassword), "connect to NATS", "x509")
	})
	t.Run("wrong password", func(t *testing.T) {
		e := *e
		e.t = t
		out := e.expectExit(e.args("--nats-tls-ca", ca.File, "--nats-user", "outboxd", "--nats-password", outboxdPassword+"x"),
			"connect to NATS", "Authorization Violation")
		noSecrets(t, out)
	})

	t.Setenv("OUTBOXD_NATS_PASSWORD", outboxdPassword)
	p := e.start(e.args("--nats-tls-ca", ca.File, "--nats-user", "outboxd")...)
	e.waitStreaming(p)
	check := checker.New()
	w := e.newWriter(check, 10)
	for range 20 {
		if _, err := w.tx(context.Background(), 5, true); err != nil {
			t.Fatal(err)
		}
	}
	e.verify(e.js(), check, time.Minute)
	if code := p.stop(time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	noSecrets(t, p.output.String())
}

// TestNATSAuthToken: outboxd logs in with a token, which it never prints.
func TestNATSAuthToken(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true, natstest.WithToken(outboxdToken))
	t.Run("wrong token", func(t *testing.T) {
		e := *e
		e.t = t
		out := e.expectExit(e.args("--nats-token", outboxdToken+"x"), "connect to NATS", "Authorization Violation")
		noSecrets(t, out)
	})
	p := e.start(e.args("--nats-token", outboxdToken)...)
	e.waitStreaming(p)
	e.streamSome(10)
	p.stopCleanly()
	noSecrets(t, p.output.String())
}

// TestPermissionRefusedPublish: a user may publish only to outbox.order.>:
// the order row is published, the invoice row is refused with a log line
// that names the subject and the permission, and the slot's
// confirmed_flush_lsn does not pass the invoice row.
func TestPermissionRefusedPublish(t *testing.T) {
	e := newEnv(t, pgtest.Shared(t), true, natstest.WithUsers(adminUser,
		&server.User{Username: "outboxd", Password: outboxdPassword, Permissions: outboxdPermissions("outbox.order.>")}))
	p := e.start(e.args("--nats-user", "outboxd", "--nats-password", outboxdPassword, "--shutdown-timeout", "2s")...)
	e.waitStreaming(p)
	conn := e.connect()
	ctx := context.Background()
	insert := func(aggregateType string) {
		t.Helper()
		if _, err := conn.Exec(ctx, `INSERT INTO public.outbox (id, aggregate_type, aggregate_id, event_type, payload)
			VALUES (gen_random_uuid(), $1, 'a1', 'Created', '{}')`, aggregateType); err != nil {
			t.Fatal(err)
		}
	}
	var start pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()").Scan(&start); err != nil {
		t.Fatal(err)
	}
	insert("order")
	js := e.js()
	if msgs := e.readStream(js, 1, time.Minute); len(msgs) != 1 || msgs[0].Subject != "outbox.order.Created" {
		t.Fatalf("stream holds %v, want one outbox.order.Created", msgs)
	}

	// The checkpoint (KV) works with these permissions: the order row is
	// confirmed.
	for deadline := time.Now().Add(time.Minute); e.confirmedFlush(conn) <= start; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("confirmed_flush_lsn %s did not pass the published order row (written after %s)", e.confirmedFlush(conn), start)
		}
	}

	var before pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	insert("invoice")
	want := "permissions violation for publish to outbox.invoice.Created"
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(p.output.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q:\n%s", want, tail(p.output.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, line := range strings.Split(p.output.String(), "\n") {
		if strings.Contains(line, want) && (!strings.Contains(line, `"permission":"publish"`) || !strings.Contains(line, `"subject":"outbox.invoice.Created"`)) {
			t.Errorf("log line lacks the permission or subject field: %s", line)
		}
	}
	// Let a few status intervals and the publish timeout pass: nothing may
	// be confirmed past the refused row meanwhile.
	time.Sleep(12 * time.Second)
	if got := e.confirmedFlush(conn); got > before {
		t.Errorf("confirmed_flush_lsn %s passed the refused row (written after %s)", got, before)
	}
	stream, err := js.Stream(ctx, streamName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetLastMsgForSubject(ctx, "outbox.invoice.>"); err == nil {
		t.Error("the refused invoice row is in the stream")
	} else if err != jetstream.ErrMsgNotFound {
		t.Logf("last invoice message: %v", err)
	}
	p.stop(time.Minute)
	if got := e.confirmedFlush(conn); got > before {
		t.Errorf("after stop, confirmed_flush_lsn %s passed the refused row (written after %s)", got, before)
	}
	if n := strings.Count(p.output.String(), want); n > 3 {
		t.Errorf("logged %q %d times, want once per state change", want, n)
	}
	noSecrets(t, p.output.String())
}

// TestNATSAuthNkey: outboxd logs in with an nkey seed file (--nats-nkey).
func TestNATSAuthNkey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, pgtest.Shared(t), true, natstest.WithNkeyUser(kp, nil))
	seedFile := filepath.Join(e.dir, "outboxd.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.start(e.args("--nats-nkey", seedFile)...)
	e.waitStreaming(p)
	e.streamSome(10)
	p.stopCleanly()
	if strings.Contains(p.output.String(), string(seed)) {
		t.Error("output shows the nkey seed")
	}
}
