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
	if !conn.drained {
		t.Fatal("a read shorter than the buffer did not mark the socket drained")
	}
	if !conn.trickling {
		t.Fatal("five bytes after a long silence did not count as a trickle")
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
		if conn.drained {
			t.Fatalf("a full read (%q) marked the socket drained: the next read would wait an hour", want)
		}
	}
}

// TestLingerConnMeasuresTheRate: the reads of a window decide whether the
// next window's short reads linger, by the rate they brought.
func TestLingerConnMeasuresTheRate(t *testing.T) {
	start := time.Now()
	perWindow := func(rate float64) int { return int(rate * rateWindow.Seconds()) }
	tests := []struct {
		name          string
		bytes         int
		after         time.Duration
		wantTrickling bool
	}{
		{"a backlog, 10 times the trickle rate", perWindow(10 * trickleRate), rateWindow, false},
		{"just above the trickle rate", perWindow(1.1 * trickleRate), rateWindow, false},
		{"5,000 one-row transactions a second", perWindow(5000 * 450), rateWindow, true},
		{"idle, then one message", 300, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &lingerConn{windowStart: start, trickling: !tt.wantTrickling}
			c.measure(tt.bytes/2, start.Add(rateWindow/2))
			if c.trickling == tt.wantTrickling {
				t.Fatal("decided before the window was over")
			}
			c.measure(tt.bytes-tt.bytes/2, start.Add(tt.after))
			if c.trickling != tt.wantTrickling {
				t.Errorf("trickling = %t after %d bytes in %s, want %t", c.trickling, tt.bytes, tt.after, tt.wantTrickling)
			}
			if c.windowBytes != 0 || !c.windowStart.Equal(start.Add(tt.after)) {
				t.Errorf("the window did not start anew: %d bytes since %s", c.windowBytes, c.windowStart)
			}
		})
	}
}

// TestLingerConnFastStreamReadsAtOnce: a read that emptied the socket
// while WAL comes faster than a trickle is a reader catching up with a
// backlog, which goes on: the next read must not wait.
func TestLingerConnFastStreamReadsAtOnce(t *testing.T) {
	client, server := loopback(t)
	conn := &lingerConn{Conn: client, linger: time.Hour, drained: true, trickling: false, windowStart: time.Now()}

	if _, err := server.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 64))
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		client.Close() // ends the read and the goroutine
		<-read
		t.Fatal("the read waited although WAL was not trickling")
	}
}
