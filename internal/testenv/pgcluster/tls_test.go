package pgcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func tryConnect(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	var ssl bool
	err = conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl)
	conn.Close(ctx)
	if err == nil && !ssl {
		err = fmt.Errorf("connected without TLS")
	}
	return err
}

func TestTLS(t *testing.T) {
	c := startCluster(t, Options{TLS: &TLSOptions{}})
	if c.CAFile() == "" {
		t.Fatal("CAFile is empty on a TLS cluster")
	}
	if got := show(t, connect(t, c), "ssl"); got != "on" {
		t.Errorf("ssl = %q, want on", got)
	}
	fi, err := os.Stat(filepath.Join(c.Dir(), "data", "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("server.key mode = %v, want 0600", fi.Mode().Perm())
	}
	if st := fi.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && st.Uid == 0 {
		t.Error("server.key is owned by root, not by the server user")
	}

	verify := "sslmode=verify-full&sslrootcert=" + c.CAFile()
	for _, host := range []string{"127.0.0.1", "localhost"} {
		dsn := fmt.Sprintf("postgres://postgres@%s:%d/postgres?%s", host, c.Port(), verify)
		if err := tryConnect(dsn); err != nil {
			t.Errorf("verify-full to %s: %v", host, err)
		}
	}
	// initdb's pg_hba.conf still allows TCP without TLS.
	if err := tryConnect(strings.Replace(c.DSN("postgres"), "sslmode=require", "sslmode=disable", 1)); err == nil ||
		!strings.Contains(err.Error(), "without TLS") {
		t.Errorf("sslmode=disable: %v, want a connection without TLS", err)
	}
}

func TestTLSRequireAndHosts(t *testing.T) {
	c := startCluster(t, Options{TLS: &TLSOptions{Hosts: []string{"db.example"}, Require: true}})
	if !strings.Contains(c.DSN("postgres"), "sslmode=require") {
		t.Errorf("DSN = %s, want sslmode=require", c.DSN("postgres"))
	}
	connect(t, c) // the DSN works
	tests := []struct {
		name    string
		query   string
		wantErr string
	}{
		{name: "no TLS", query: "sslmode=disable", wantErr: "no encryption"},
		{name: "wrong host", query: "sslmode=verify-full&sslrootcert=" + c.CAFile(), wantErr: "x509: cannot validate certificate for 127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tryConnect(fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?%s", c.Port(), tt.query))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}
