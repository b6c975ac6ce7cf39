package natstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

func connectOnce(url string, opts ...nats.Option) error {
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(5 * time.Second)}, opts...)...)
	if err == nil {
		nc.Close()
	}
	return err
}

func TestWithTLS(t *testing.T) {
	ca := NewCA(t)
	s := Start(t, WithTLS(t, ca, false))
	if _, err := s.JetStream(t).AccountInfo(context.Background()); err != nil {
		t.Fatalf("JetStream over TLS: %v", err)
	}
	if !s.Conn(t).TLSRequired() {
		t.Error("TLSRequired = false, want true")
	}
	if err := connectOnce(s.URL()); err == nil {
		t.Error("connect without the test CA: no error, want a certificate error")
	}
	if err := connectOnce(s.URL(), nats.RootCAs(NewCA(t).File)); err == nil {
		t.Error("connect trusting another CA: no error, want a certificate error")
	}
}

func TestWithTLSVerifyClients(t *testing.T) {
	ca := NewCA(t)
	s := Start(t, WithTLS(t, ca, true))
	s.Conn(t) // Conn presents a client certificate
	if err := connectOnce(s.URL(), nats.RootCAs(ca.File)); err == nil {
		t.Error("connect without a client certificate: no error")
	}
}

func TestWithUsers(t *testing.T) {
	s := Start(t, WithUsers(
		&server.User{Username: "admin", Password: "admin-pw"},
		&server.User{Username: "limited", Password: "limited-pw", Permissions: PublishOnly("ok.>", "_INBOX.>")},
	))
	js := s.JetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"ok.>", "no.>"}}); err != nil {
		t.Fatalf("admin creates a stream: %v", err)
	}
	if err := connectOnce(s.URL(), nats.UserInfo("limited", "wrong")); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("wrong password: err = %v, want %v", err, nats.ErrAuthorization)
	}
	violations := make(chan error, 10)
	nc := s.Conn(t, nats.UserInfo("limited", "limited-pw"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		violations <- err
	}))
	if err := nc.Publish("ok.1", nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("no.1", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("async error = %v, want a permissions violation", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("no permissions violation for a publish to no.1")
	}
}

func TestWithToken(t *testing.T) {
	s := Start(t, WithToken("s3cret-token"))
	if _, err := s.JetStream(t).AccountInfo(context.Background()); err != nil {
		t.Fatalf("JetStream with the token: %v", err)
	}
	if err := connectOnce(s.URL(), nats.Token("other")); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("wrong token: err = %v, want %v", err, nats.ErrAuthorization)
	}
}

func TestWithNkeyUser(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	s := Start(t, WithNkeyUser(kp, nil))
	if _, err := s.JetStream(t).AccountInfo(context.Background()); err != nil {
		t.Fatalf("JetStream with the nkey: %v", err)
	}
	other, _ := nkeys.CreateUser()
	pub, _ := other.PublicKey()
	if err := connectOnce(s.URL(), nats.Nkey(pub, other.Sign)); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("unknown nkey: err = %v, want %v", err, nats.ErrAuthorization)
	}
}
