package replication

import (
	"bytes"
	"errors"
	"net"
	"os"
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

// streamingConn returns the client end of a loopback connection wrapped
// in a lingerConn that streams (batch called), and the server end.
func streamingConn(t *testing.T, linger time.Duration) (*lingerConn, net.Conn) {
	t.Helper()
	client, server := loopback(t)
	conn := newLingerConn(client, linger)
	conn.batch()
	if !conn.batching {
		t.Fatal("a TCP connection does not batch its reads")
	}
	return conn, server
}

// readWithin runs conn.Read(buf) and fails the test when it has not
// returned within limit (closing conn ends it).
func readWithin(t *testing.T, conn net.Conn, buf []byte, limit time.Duration) (int, error) {
	t.Helper()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := conn.Read(buf)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-time.After(limit):
		conn.Close()
		<-done
		t.Fatalf("the read did not return within %s", limit)
		return 0, nil
	}
}

// TestLingerConnBatchesATrickle sends three messages a few milliseconds
// apart after the reader emptied the socket: the next read returns all
// three once the linger is over, where a plain connection would return the
// first alone.
func TestLingerConnBatchesATrickle(t *testing.T) {
	const linger = 300 * time.Millisecond
	conn, server := streamingConn(t, linger)

	buf := make([]byte, 1024)
	if _, err := server.Write([]byte("begin")); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "begin" {
		t.Fatalf("first read = %q, %v; want %q", buf[:n], err, "begin")
	}

	done := make(chan error, 1)
	go func() {
		// Later than the read below begins, which must find nothing
		// waiting (it would take that at once).
		time.Sleep(50 * time.Millisecond)
		for _, msg := range []string{"B", "I", "C"} {
			time.Sleep(5 * time.Millisecond)
			if _, err := server.Write([]byte(msg)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	start := time.Now()
	n, err = readWithin(t, conn, buf, 10*time.Second)
	waited := time.Since(start)
	if werr := <-done; werr != nil {
		t.Fatal(werr)
	}
	if err != nil || string(buf[:n]) != "BIC" {
		t.Fatalf("read after the linger = %q, %v; want the three messages in one read, %q", buf[:n], err, "BIC")
	}
	if waited < linger*9/10 {
		t.Errorf("the read returned after %s, before the linger of %s was over", waited, linger)
	}
}

// TestLingerConnFastStreamReadsABatch: data sent in many small pieces,
// faster than the linger, is read a batch at a time: a few reads, where a
// plain connection would return about one piece each.
func TestLingerConnFastStreamReadsABatch(t *testing.T) {
	conn, server := streamingConn(t, time.Hour)

	const piece, pieces = 300, 60 // 18,000 bytes: more than two batches
	go func() {
		msg := bytes.Repeat([]byte("m"), piece)
		for range pieces {
			if _, err := server.Write(msg); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	buf := make([]byte, 4*batchBytes)
	total, reads := 0, 0
	for total < 2*batchBytes {
		n, err := readWithin(t, conn, buf, 10*time.Second)
		if err != nil {
			t.Fatalf("read %d: %v after %d bytes", reads+1, err, total)
		}
		total += n
		reads++
	}
	// The first read may take what was waiting when it began; every later
	// one waits for a batch.
	if reads > 6 {
		t.Errorf("%d bytes, sent in %d pieces, took %d reads; want a few batches", total, pieces, reads)
	}
}

// TestLingerConnBehindNeverWaits: a reader that finds data waiting, less
// than a batch, takes it at once: it is behind the server, and what it
// has not read yet is all there is.
func TestLingerConnBehindNeverWaits(t *testing.T) {
	conn, server := streamingConn(t, time.Hour)

	if _, err := server.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let it arrive whole
	buf := make([]byte, 4)
	for _, want := range []string{"0123", "4567", "89"} {
		n, err := readWithin(t, conn, buf, 10*time.Second)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("read = %q, %v; want %q", buf[:n], err, want)
		}
	}
}

// TestLingerConnCallersDeadlineFirst: a read waiting for a batch ends at
// the caller's deadline when that comes before the linger (a status update
// is due), and at once when the caller moves its deadline to now (Run's
// cancellation). A later read still gets data.
func TestLingerConnCallersDeadlineFirst(t *testing.T) {
	conn, server := streamingConn(t, time.Hour)
	buf := make([]byte, 64)

	if err := conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := readWithin(t, conn, buf, 10*time.Second); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the caller's deadline: %v, want a timeout", err)
	}

	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		conn.SetReadDeadline(time.Now()) //nolint:errcheck
	}()
	if _, err := readWithin(t, conn, buf, 10*time.Second); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the deadline moved to now: %v, want a timeout", err)
	}

	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	conn.linger = time.Millisecond
	if _, err := server.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	n, err := readWithin(t, conn, buf, 10*time.Second)
	if err != nil || string(buf[:n]) != "after" {
		t.Fatalf("read after the timeouts = %q, %v; want %q", buf[:n], err, "after")
	}
}

// TestLingerConnWaitsOnlyWhenStreaming: before batch (the start-up
// exchange), and on a socket without SO_RCVLOWAT, reads never wait.
func TestLingerConnWaitsOnlyWhenStreaming(t *testing.T) {
	client, server := loopback(t)
	conn := newLingerConn(client, time.Hour)
	if _, err := server.Write([]byte("ready")); err != nil {
		t.Fatal(err)
	}
	if _, err := readWithin(t, conn, make([]byte, 64), 10*time.Second); err != nil {
		t.Fatal(err)
	}

	pipeClient, pipeServer := net.Pipe()
	defer pipeServer.Close()
	piped := newLingerConn(pipeClient, time.Hour)
	piped.batch()
	if piped.batching {
		t.Fatal("a pipe, which has no SO_RCVLOWAT, batches its reads")
	}
}

// TestLingerConnOffWithoutLinger: --read-linger 0 reads at once.
func TestLingerConnOffWithoutLinger(t *testing.T) {
	client, _ := loopback(t)
	conn := newLingerConn(client, 0)
	conn.batch()
	if conn.batching {
		t.Fatal("a zero linger batches reads")
	}
}
