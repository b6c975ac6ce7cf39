package replication

import (
	"io"
	"net"
	"testing"
	"time"
)

// loopback returns both ends of a TCP connection on localhost: the
// walsender's socket is TCP, and a pipe (net.Pipe) would hand over one
// write per read whatever the reader does.
func loopback(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestLingerConnBatchesATrickle sends three messages a few milliseconds
// apart after the reader emptied the socket: with the linger the next read
// returns all three, where a plain connection would return the first alone.
func TestLingerConnBatchesATrickle(t *testing.T) {
	client, server := loopback(t)
	conn := &lingerConn{Conn: client, linger: 300 * time.Millisecond}

	buf := make([]byte, 1024)
	if _, err := server.Write([]byte("begin")); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "begin" {
		t.Fatalf("first read = %q, %v; want %q", buf[:n], err, "begin")
	}
	if !conn.trickled {
		t.Fatal("a read shorter than the buffer did not mark the socket trickling")
	}

	done := make(chan error, 1)
	go func() {
		for _, msg := range []string{"B", "I", "C"} {
			time.Sleep(5 * time.Millisecond)
			if _, err := server.Write([]byte(msg)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	n, err = conn.Read(buf)
	if werr := <-done; werr != nil {
		t.Fatal(werr)
	}
	if err != nil || string(buf[:n]) != "BIC" {
		t.Fatalf("read after the linger = %q, %v; want the three messages in one read, %q", buf[:n], err, "BIC")
	}
}

// TestLingerConnBehindNeverWaits: a reader that fills its buffer is behind
// the server, so its next read must not wait.
func TestLingerConnBehindNeverWaits(t *testing.T) {
	client, server := loopback(t)
	conn := &lingerConn{Conn: client, linger: time.Hour}

	if _, err := server.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	for _, want := range []string{"0123", "4567"} {
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != want {
			t.Fatalf("read = %q, %v; want %q", buf, err, want)
		}
		if conn.trickled {
			t.Fatalf("a full read (%q) marked the socket trickling: the next read would wait an hour", want)
		}
	}
}

// TestLingerConnCaughtUpReadsAtOnce: a read that emptied the socket but
// brought more than a trickle comes from a reader that has just caught up
// with a backlog, which may go on: the next read must not wait.
func TestLingerConnCaughtUpReadsAtOnce(t *testing.T) {
	client, server := loopback(t)
	conn := &lingerConn{Conn: client, linger: time.Hour}

	sent := make([]byte, 2*trickleBytes)
	if _, err := server.Write(sent); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let all of it reach the socket
	buf := make([]byte, 4*trickleBytes)
	n, err := conn.Read(buf)
	if err != nil || n != len(sent) {
		t.Fatalf("read = %d bytes, %v; want %d", n, err, len(sent))
	}
	if conn.trickled {
		t.Fatalf("a short read of %d bytes (more than %d) marked the socket trickling: the next read would wait an hour", n, trickleBytes)
	}
}
