package replication

import (
	"net"
	"time"
)

const (
	// trickleRate is the most WAL a second, in bytes, that counts as a
	// trickle: about 9,000 one-row transactions. A reader catching up with
	// a backlog receives several times that, and never lingers; below it,
	// reading every message as it comes costs more than it saves.
	trickleRate = 4 << 20
	// rateWindow is how long the receive rate is measured over before it
	// decides whether the next short reads linger.
	rateWindow = 10 * time.Millisecond
)

// lingerConn batches reads from a socket that trickles. The walsender
// writes every pgoutput message with a send of its own, so at a few
// thousand small transactions a second a reader that is always waiting
// wakes up for each message: three wake-ups and read calls per one-row
// transaction, which cost more CPU than decoding and publishing it. While
// WAL arrives at less than trickleRate, lingerConn waits linger after a
// read that emptied the socket (it returned less than the buffer holds),
// so the messages sent meanwhile arrive in one read. A reader behind the
// server fills its buffer on every read, and one catching up with a
// backlog sees more than trickleRate: neither waits, so the walsender is
// never left with a full socket.
type lingerConn struct {
	net.Conn
	linger time.Duration

	drained     bool      // the last read emptied the socket
	trickling   bool      // the last window's rate was below trickleRate
	windowStart time.Time // the current rate window began
	windowBytes int       // bytes read in the current window
}

func (c *lingerConn) Read(p []byte) (int, error) {
	if c.drained && c.trickling {
		time.Sleep(c.linger)
	}
	n, err := c.Conn.Read(p)
	c.drained = n < len(p)
	c.measure(n, time.Now())
	return n, err
}

// measure adds n bytes read at now to the rate window, and when the
// window is over decides whether the reads of the next one may linger.
func (c *lingerConn) measure(n int, now time.Time) {
	c.windowBytes += n
	elapsed := now.Sub(c.windowStart)
	if elapsed < rateWindow {
		return
	}
	c.trickling = float64(c.windowBytes) < trickleRate*elapsed.Seconds()
	c.windowStart, c.windowBytes = now, 0
}
