package checkpoint

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startServer starts an in-process nats-server with JetStream keeping its
// data in storeDir, on port (-1 picks a free one), on loopback.
func startServer(tb testing.TB, storeDir string, port int) *server.Server {
	tb.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  storeDir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		tb.Fatalf("new nats-server: %v", err)
	}
	srv.Start()
	tb.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server not ready after 10s")
	}
	return srv
}

// connect returns a JetStream client of srv, closed at cleanup.
func connect(tb testing.TB, srv *server.Server) jetstream.JetStream {
	tb.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		tb.Fatalf("connect to nats-server: %v", err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("jetstream: %v", err)
	}
	return js
}

// startJetStream starts a server in a temporary folder and connects to it.
func startJetStream(tb testing.TB) jetstream.JetStream {
	tb.Helper()
	return connect(tb, startServer(tb, tb.TempDir(), -1))
}

func TestKVStore(t *testing.T) {
	js := startJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s, err := NewKVStore(ctx, js, "outboxd", "slot_a")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), "kv:outboxd/slot_a"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}

	kv, err := js.KeyValue(ctx, "outboxd")
	if err != nil {
		t.Fatalf("bucket was not created: %v", err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := status.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	if cfg.Storage != jetstream.FileStorage {
		t.Errorf("bucket storage = %v, want file", cfg.Storage)
	}
	if status.History() != 1 {
		t.Errorf("bucket history = %d, want 1", status.History())
	}

	if _, err := s.Load(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load before Save: err = %v, want ErrNotFound", err)
	}
	cp := testCheckpoint()
	if err := s.Save(ctx, cp); err != nil {
		t.Fatal(err)
	}
	cp.LSN += 1000
	if err := s.Save(ctx, cp); err != nil {
		t.Fatal(err)
	}

	// A second store on the existing bucket, as after a restart, sees the
	// newest value; another key in the same bucket is independent.
	again, err := NewKVStore(ctx, js, "outboxd", "slot_a")
	if err != nil {
		t.Fatalf("NewKVStore on existing bucket: %v", err)
	}
	got, err := again.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != cp {
		t.Errorf("Load = %+v, want %+v", got, cp)
	}
	other, err := NewKVStore(ctx, js, "outboxd", "slot_b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Load(ctx); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load of another slot's key: err = %v, want ErrNotFound", err)
	}

	// A deleted key reads as no checkpoint, a garbage value as an error.
	if err := kv.Delete(ctx, "slot_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Load(ctx); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load of deleted key: err = %v, want ErrNotFound", err)
	}
	if _, err := kv.Put(ctx, "slot_a", []byte(`{"lsn":"nope"}`)); err != nil {
		t.Fatal(err)
	}
	_, err = again.Load(ctx)
	if err == nil || errors.Is(err, ErrNotFound) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "kv:outboxd/slot_a") ||
		!strings.Contains(err.Error(), `invalid lsn "nope"`) || !strings.Contains(err.Error(), "nats kv del outboxd slot_a") {
		t.Errorf("Load of corrupt value: err = %v, want an ErrCorrupt naming the key, the bad lsn and how to delete it", err)
	}
}

func TestNewKVStoreInvalid(t *testing.T) {
	js := startJetStream(t)
	ctx := context.Background()
	tests := []struct {
		name, bucket, key, wantErr string
	}{
		{name: "bucket with dot", bucket: "a.b", key: "k", wantErr: `bucket "a.b": invalid name`},
		{name: "empty bucket", bucket: "", key: "k", wantErr: `bucket "": invalid name`},
		{name: "empty key", bucket: "b", key: "", wantErr: `invalid key ""`},
		{name: "key with space", bucket: "b", key: "a b", wantErr: `invalid key "a b"`},
		{name: "key ending in dot", bucket: "b", key: "a.", wantErr: `invalid key "a."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewKVStore(ctx, js, tt.bucket, tt.key)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestKVStoreServerDown(t *testing.T) {
	js := startJetStream(t)
	ctx := context.Background()
	s, err := NewKVStore(ctx, js, "outboxd", "slot")
	if err != nil {
		t.Fatal(err)
	}
	js.Conn().Close()
	shortCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.Save(shortCtx, testCheckpoint()); err == nil || !strings.Contains(err.Error(), "save checkpoint kv:outboxd/slot") {
		t.Errorf("Save with the connection closed: err = %v, want a save error naming the store", err)
	}
}

// TestKVStoreSurvivesServerRestart checks that the bucket really is on disk:
// a checkpoint saved before the server stops is there after it restarts on
// the same store.
func TestKVStoreSurvivesServerRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	srv := startServer(t, dir, -1)
	port := srv.Addr().(*net.TCPAddr).Port
	s, err := NewKVStore(ctx, connect(t, srv), "outboxd", "slot")
	if err != nil {
		t.Fatal(err)
	}
	cp := testCheckpoint()
	if err := s.Save(ctx, cp); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()

	srv = startServer(t, dir, port)
	s, err = NewKVStore(ctx, connect(t, srv), "outboxd", "slot")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(ctx)
	if err != nil {
		t.Fatalf("Load after server restart: %v", err)
	}
	if got != cp {
		t.Errorf("Load after server restart = %+v, want %+v", got, cp)
	}
}

// TestOpenKVStore: a reader creates no bucket; a missing bucket reads as no
// checkpoint; an existing one gives what NewKVStore saved.
func TestOpenKVStore(t *testing.T) {
	js := startJetStream(t)
	ctx := context.Background()
	if _, err := OpenKVStore(ctx, js, "ckpt", "slot"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "ckpt") {
		t.Fatalf("OpenKVStore of a missing bucket = %v, want ErrNotFound naming it", err)
	}
	if _, err := js.KeyValue(ctx, "ckpt"); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("OpenKVStore created the bucket (KeyValue: %v)", err)
	}
	if _, err := OpenKVStore(ctx, js, "bad bucket", "slot"); err == nil || !strings.Contains(err.Error(), `"bad bucket"`) {
		t.Errorf("OpenKVStore with a bad bucket name = %v, want an error naming it", err)
	}
	writer, err := NewKVStore(ctx, js, "ckpt", "slot")
	if err != nil {
		t.Fatal(err)
	}
	want := Checkpoint{LSN: 0x16B374D848, SystemID: "7", Timeline: 1, Slot: "slot", SavedAt: time.Now().UTC().Truncate(time.Second)}
	if err := writer.Save(ctx, want); err != nil {
		t.Fatal(err)
	}
	reader, err := OpenKVStore(ctx, js, "ckpt", "slot")
	if err != nil {
		t.Fatal(err)
	}
	got, err := reader.Load(ctx)
	if err != nil || got != want {
		t.Errorf("Load = %+v, %v; want %+v", got, err, want)
	}
	if reader.String() != "kv:ckpt/slot" {
		t.Errorf("String() = %q", reader.String())
	}
}
