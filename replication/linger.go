package replication

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// batchBytes is how much data a read that waits for a batch waits for:
// pgconn's read buffer (8 KiB), a few dozen small pgoutput messages.
const batchBytes = 8 << 10

// lingerConn batches reads from a socket that the walsender writes to one
// message at a time. The walsender sends every pgoutput message with a
// send of its own, so a reader that keeps up with it (a trickle of
// commits, or a backlog drained faster than the walsender decodes it)
// wakes up for each message: a read, a wait in the poller and a wake-up
// per message, paid by outboxd and by the walsender, which costs more CPU
// than decoding and publishing the message.
//
// Once streaming (batch called), the socket's SO_RCVLOWAT is batchBytes:
// the kernel wakes the reader only when that much waits, and every read
// waits at most linger for it, then takes what there is. A fast stream is
// read in batches with no wait worth the name, a trickle at most linger
// late, and a reader behind the server finds its batch waiting. Only TCP
// has SO_RCVLOWAT in the poller; on other sockets reads do not wait.
type lingerConn struct {
	net.Conn
	linger time.Duration
	// setLowat sets SO_RCVLOWAT: the poller reports the socket readable
	// only once that many bytes wait. Nil when the socket has none.
	setLowat func(bytes int) error

	mu       sync.Mutex
	deadline time.Time // the read deadline the user set
	batching bool      // streaming, and SO_RCVLOWAT is batchBytes
}

// newLingerConn wraps c; reads wait for batches once batch is called.
func newLingerConn(c net.Conn, linger time.Duration) *lingerConn {
	lc := &lingerConn{Conn: c, linger: linger}
	if tcp, ok := c.(*net.TCPConn); ok {
		lc.setLowat = func(bytes int) error { return setReceiveLowat(tcp, bytes) }
	}
	return lc
}

func setReceiveLowat(c *net.TCPConn, bytes int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, bytes)
	}); err != nil {
		return err
	}
	return serr
}

// batch starts batching reads: the connection streams. (The start-up
// exchange before it is a few short messages, each answered at once.)
// Where SO_RCVLOWAT cannot be set, reads go on as they were.
func (c *lingerConn) batch() {
	if c.linger <= 0 || c.setLowat == nil || c.setLowat(batchBytes) != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batching = true
}

// SetReadDeadline records the caller's deadline, which reads that wait
// for a batch never wait past.
func (c *lingerConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline and the write deadline in one.
func (c *lingerConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

// Read waits until batchBytes have arrived, or linger has passed and then
// takes what came, or the caller's deadline has passed; before batch it is
// a plain read.
func (c *lingerConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	outer, batching := c.deadline, c.batching
	c.mu.Unlock()
	if !batching {
		return c.Conn.Read(p)
	}
	until := time.Now().Add(c.linger)
	if !outer.IsZero() && !until.Before(outer) {
		until = outer // the caller's deadline comes first
	}
	if err := c.Conn.SetReadDeadline(until); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	outer = c.deadline // SetReadDeadline may have moved it meanwhile
	c.mu.Unlock()
	if derr := c.Conn.SetReadDeadline(outer); err == nil {
		err = derr
	}
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) || (!outer.IsZero() && !time.Now().Before(outer)) {
		return n, err
	}
	// The linger passed with less than a batch waiting: take what is
	// there, or wait for the first byte as a plain read does.
	if err := c.setLowat(1); err != nil {
		return 0, err
	}
	n, err = c.Conn.Read(p)
	if lerr := c.setLowat(batchBytes); err == nil {
		err = lerr
	}
	return n, err
}
