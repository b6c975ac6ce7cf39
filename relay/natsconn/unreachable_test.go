package natsconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
)

// TestExplainUnreachable: with the server down at start, a JetStream
// request and a publish fail with an error that names the URL (without
// its password) and the dial error, not nats.go's "outbound buffer limit
// exceeded"; once the server is back, requests work and other errors pass
// through unchanged.
func TestExplainUnreachable(t *testing.T) {
	srv := natstest.Start(t)
	srv.Shutdown() // its port stays free for Restart
	port := strings.TrimPrefix(srv.URL(), "nats://127.0.0.1:")
	nc, err := Connect("nats://outboxd:s3cret@127.0.0.1:"+port, Auth{}, zerolog.Nop(), func() {})
	if err != nil {
		t.Fatalf("Connect with the server down = %v, want a connection that retries", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	want := fmt.Sprintf("NATS at nats://[redacted]@127.0.0.1:%s cannot be reached: dial tcp 127.0.0.1:%s: connect: connection refused; is nats-server running with -js?", port, port)
	_, streamErr := js.Stream(ctx, "OUTBOX")
	for name, err := range map[string]error{
		"stream info": fmt.Errorf("read stream %q: %w", "OUTBOX", streamErr),
		"publish":     nc.Publish("outbox.x", []byte("{}")),
	} {
		got := Explain(nc, err)
		var unreachable *UnreachableError
		if !errors.As(got, &unreachable) || got.Error() != want {
			t.Errorf("%s: Explain(%v) = %v,\nwant %s", name, err, got, want)
		}
		if !errors.Is(got, nats.ErrReconnectBufExceeded) {
			t.Errorf("%s: Explain(%v) does not wrap the request's error", name, err)
		}
		if strings.Contains(got.Error(), "s3cret") {
			t.Errorf("%s: %q quotes the password", name, got)
		}
	}

	srv.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for !nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatalf("not reconnected: %v", nc.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := js.Stream(ctx, "OUTBOX"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream info with the server up = %v, want %v", err, jetstream.ErrStreamNotFound)
	}
	other := fmt.Errorf("read stream: %w", jetstream.ErrStreamNotFound)
	if got := Explain(nc, other); got != other {
		t.Errorf("Explain(%v) = %v, want it unchanged", other, got)
	}
}

// TestUnreachableErrorHint: the hint fits the cause: the server for a
// network error (or none yet), the host name for a name that does not
// resolve, none when the server answered and refused.
func TestUnreachableErrorHint(t *testing.T) {
	tests := []struct {
		name  string
		cause error
		want  string
	}{
		{"no attempt yet", nil, "NATS at nats://a:4222 cannot be reached: not connected yet; is nats-server running with -js?"},
		{
			"connection refused",
			&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 4222}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
			"NATS at nats://a:4222 cannot be reached: dial tcp 10.0.0.1:4222: connect: connection refused; is nats-server running with -js?",
		},
		{"host not found", &net.DNSError{Err: "no such host", Name: "a", IsNotFound: true}, "NATS at nats://a:4222 cannot be reached: lookup a: no such host; check the host name in --nats-url"},
		{"refused by the server", nats.ErrAuthorization, "NATS at nats://a:4222 cannot be reached: nats: authorization violation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (&UnreachableError{Servers: []string{"nats://a:4222"}, Cause: tt.cause}).Error()
			if got != tt.want {
				t.Errorf("Error() = %q,\nwant %q", got, tt.want)
			}
		})
	}
}
