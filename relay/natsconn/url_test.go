package natsconn

import (
	"strings"
	"testing"
)

func TestValidateURL(t *testing.T) {
	tests := []struct {
		name string
		list string
		// wantErr holds what the error must say; nil for a valid list.
		wantErr []string
	}{
		{name: "nats", list: "nats://127.0.0.1:4222"},
		{name: "tls", list: "tls://nats.example.com:4222"},
		{name: "websocket", list: "ws://127.0.0.1:8080"},
		{name: "websocket over TLS", list: "wss://nats.example.com"},
		{name: "host and port without a scheme", list: "127.0.0.1:4222"},
		{name: "host without a port", list: "nats.example.com"},
		{name: "upper-case scheme", list: "NATS://127.0.0.1:4222"},
		{name: "user and password", list: "nats://outboxd:s3cret@127.0.0.1:4222"},
		{name: "list with spaces and an empty entry", list: "nats://a:4222, tls://b:4222,,nats://c:4222"},
		{
			name:    "http",
			list:    "http://127.0.0.1:8222",
			wantErr: []string{`--nats-url "http://127.0.0.1:8222" is not a NATS URL`, "scheme is http", "nats://host:4222", "tls://", "ws://", "wss://", "--nats-monitor-url"},
		},
		{
			name:    "https",
			list:    "https://nats.example.com",
			wantErr: []string{"is not a NATS URL", "scheme is https", "--nats-monitor-url"},
		},
		{
			name:    "postgres",
			list:    "postgres://db:5432/app",
			wantErr: []string{`"postgres://db:5432/app" is not a NATS URL`, "scheme is postgres", "nats://host:4222"},
		},
		{
			name:    "second of a list",
			list:    "nats://a:4222,http://b:8222",
			wantErr: []string{`--nats-url "nats://a:4222,http://b:8222": "http://b:8222" is not a NATS URL`},
		},
		{
			name:    "bad second of a list",
			list:    "nats://a:4222,nats://b :4222",
			wantErr: []string{`--nats-url "nats://a:4222,nats://b :4222": "nats://b :4222" is not a URL`},
		},
		{name: "empty", list: "", wantErr: []string{`--nats-url "" is not a URL`, "nats://host:4222"}},
		{name: "only commas", list: " , ,", wantErr: []string{`--nats-url " , ," is not a URL`}},
		{name: "does not parse", list: "nats://127.0.0.1:42x22", wantErr: []string{`--nats-url "nats://127.0.0.1:42x22" is not a URL`}},
		{name: "no host", list: "nats://:4222", wantErr: []string{"names no host"}},
		{
			name:    "WebSocket mixed with TCP",
			list:    "ws://a:8080,nats://b:4222",
			wantErr: []string{"mixes WebSocket", "list only one"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateURL(tt.list)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ValidateURL(%q) = %v, want nil", tt.list, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateURL(%q) = nil, want an error", tt.list)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ValidateURL(%q) = %q, want it to say %q", tt.list, err, want)
				}
			}
		})
	}
}

// TestValidateURLRedacts: an error quotes the URL without its user,
// password or token, parsed or not.
func TestValidateURLRedacts(t *testing.T) {
	for _, list := range []string{
		"http://outboxd:s3cret@127.0.0.1:8222",
		"https://s3cret@nats.example.com",
		"nats://outboxd:s3cret@127.0.0.1:42x22",
		"nats://outboxd:p@s3cret@host:4222/%zz",
		"nats://a:4222, http://outboxd:s3cret@b:8222",
	} {
		err := ValidateURL(list)
		if err == nil {
			t.Fatalf("ValidateURL(%q) = nil, want an error", list)
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "[redacted]@") {
			t.Errorf("ValidateURL(%q) = %q: want the user information redacted", list, err)
		}
	}
}
