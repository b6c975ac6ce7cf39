package replication

import (
	"net"
	"time"
)

// trickleBytes is the most a read that emptied the socket may bring for
// the connection to linger before the next: a few one-row transactions. A
// reader that has just caught up with a backlog brings more than this, and
// reads again at once.
const trickleBytes = 1024

// lingerConn batches reads from a socket that trickles. The walsender
// writes every pgoutput message with a send of its own, so at a few
// thousand small transactions a second a reader that is always waiting
// wakes up for each message: three wake-ups and read calls per one-row
// transaction, which cost more CPU than decoding and publishing it. After
// a read that emptied the socket (it returned less than the buffer holds)
// and brought no more than a trickle, lingerConn waits linger before the
// next read, so the messages sent meanwhile arrive in one read. A reader
// behind the server fills its buffer on every read and never waits.
type lingerConn struct {
	net.Conn
	linger   time.Duration
	trickled bool // the last read emptied the socket and brought little
}

func (c *lingerConn) Read(p []byte) (int, error) {
	if c.trickled {
		time.Sleep(c.linger)
	}
	n, err := c.Conn.Read(p)
	c.trickled = n < len(p) && n <= trickleBytes
	return n, err
}
