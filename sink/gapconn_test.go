package sink

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// gapDialer connects a NATS client through a connection that drops, once,
// the n-th message the client publishes into a fast batch (reply subject
// <inbox>.<flow>.<gap mode>.<seq>.<op>.$FI): on the wire, as a lost packet
// would, so the server sees a gap in the batch. Every other byte goes
// through unchanged.
type gapDialer struct {
	n       int
	seen    atomic.Int64
	dropped atomic.Bool
}

func (d *gapDialer) Dial(network, address string) (net.Conn, error) {
	c, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return &gapConn{Conn: c, dialer: d}, nil
}

// gapConn parses what the client writes into protocol operations: a line
// ending in CRLF, and after PUB or HPUB a payload of the size the line's
// last field gives, with its CRLF.
type gapConn struct {
	net.Conn
	dialer *gapDialer

	mu       sync.Mutex
	pending  []byte // bytes of an operation not complete yet
	payload  int    // bytes of the current PUB's payload still to come
	dropping bool   // the current PUB is the one to drop
}

func (c *gapConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, p...)
	var out []byte
	for {
		if c.payload > 0 {
			n := min(c.payload, len(c.pending))
			if !c.dropping {
				out = append(out, c.pending[:n]...)
			}
			c.pending, c.payload = c.pending[n:], c.payload-n
			if c.payload > 0 {
				break
			}
			continue
		}
		end := bytes.Index(c.pending, []byte("\r\n"))
		if end < 0 {
			break
		}
		line := c.pending[:end+2]
		c.dropping = false
		if fields := strings.Fields(string(line)); len(fields) >= 3 && (fields[0] == "PUB" || fields[0] == "HPUB") {
			size, _ := strconv.Atoi(fields[len(fields)-1])
			c.payload = size + 2
			c.dropping = c.drop(fields)
		}
		if !c.dropping {
			out = append(out, line...)
		}
		c.pending = c.pending[end+2:]
	}
	if len(out) > 0 {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// drop reports whether this publish is the one to lose.
func (c *gapConn) drop(fields []string) bool {
	replyAt := 2 // PUB subject reply size, HPUB subject reply hsize size
	if (fields[0] == "PUB" && len(fields) != 4) || (fields[0] == "HPUB" && len(fields) != 5) {
		return false // no reply subject
	}
	reply := fields[replyAt]
	if !strings.HasSuffix(reply, ".$FI") {
		return false
	}
	if c.dialer.seen.Add(1) != int64(c.dialer.n) {
		return false
	}
	c.dialer.dropped.Store(true)
	return true
}
