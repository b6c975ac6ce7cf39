package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/natsembed"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

// ClusterName is the name of every cluster StartCluster starts.
const ClusterName = "outboxd-test"

// clusterTimeout bounds each wait on the cluster, generously: on an idle
// machine elections take well under a second, because Shutdown steps a
// node's raft leaders down first, and a restarted node is current again
// within about three seconds.
const clusterTimeout = 45 * time.Second

// infoTimeout bounds one stream info request. While a stream has no leader
// nobody answers, so the request only ends at this timeout; short keeps
// StreamLeader close to the moment of election.
const infoTimeout = 500 * time.Millisecond

// startAttempts is how often StartCluster picks new ports: they are chosen
// before the nodes start, so another process can take one in between.
const startAttempts = 3

// Cluster is an in-process JetStream cluster whose nodes can be shut down and
// restarted one by one, for failover tests. Its methods are safe for
// concurrent use.
type Cluster struct {
	nodes []*Server // fixed at start; node i is named n<i+1>
}

// StartCluster starts n clustered nodes (three for failover tests) and
// waits until JetStream has elected a metadata leader that every node
// follows. Node i is named n<i+1>, keeps its store under t.TempDir() and
// listens for clients and routes on loopback ports that stay the same
// across Restart; every node routes to every other. opts apply to every
// node. t.Cleanup shuts the cluster down.
func StartCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 2 {
		t.Fatalf("natstest: StartCluster needs at least 2 nodes, got %d", n)
	}
	var (
		c   *Cluster
		err error
	)
	for range startAttempts {
		if c, err = startCluster(t, n, opts); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("start a %d-node cluster: %v", n, err)
	}
	t.Cleanup(c.Shutdown)
	c.WaitReady(t)
	return c
}

func startCluster(t testing.TB, n int, opts []Option) (*Cluster, error) {
	ports, err := freePorts(2 * n) // n client ports, then n route ports
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i])
	}
	c := &Cluster{nodes: make([]*Server, n)}
	for i := range n {
		cfg := settings{Config: natsembed.Config{StoreDir: t.TempDir()}}
		for _, o := range opts {
			o(&cfg)
		}
		cfg.Port = ports[i]
		cfg.ServerName = fmt.Sprintf("n%d", i+1)
		// Every node lists every route, its own included: JetStream sizes
		// its first metadata group from the list.
		cfg.Cluster = natsembed.ClusterConfig{Name: ClusterName, Port: ports[n+i], Routes: routes}
		c.nodes[i] = &Server{cfg: cfg}
	}
	for _, s := range c.nodes {
		if err := s.restart(); err != nil {
			c.Shutdown()
			return nil, fmt.Errorf("node %s: %w", s.Name(), err)
		}
	}
	return c, nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		// Closed only after the loop, so the kernel hands out distinct ports.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Len returns the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// Node returns node i, counted from 0 (its name is n<i+1>). Shut it down
// and Restart it like a single Server; its ports and store stay the same.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// URL returns the client URLs of all nodes, comma-separated, for
// nats.Connect. It stays the same across restarts.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// Conn connects to the cluster through all its URLs, like Server.Conn: it
// reconnects without limit, to whichever node runs.
func (c *Cluster) Conn(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return connect(t, c.URL(), append(append([]nats.Option(nil), c.nodes[0].cfg.client...), opts...))
}

// JetStream returns a JetStream context on a new Conn(t).
func (c *Cluster) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	return newJetStream(t, c.Conn(t))
}

// Shutdown stops every node that runs, keeping stores and ports.
func (c *Cluster) Shutdown() {
	var wg sync.WaitGroup
	for _, s := range c.nodes {
		wg.Go(s.Shutdown)
	}
	wg.Wait()
}

// WaitReady waits until JetStream has a metadata leader, every running node
// is current with it, and every stream and consumer replica on a running
// node has caught up (the server's healthz check); nodes that are shut down
// are not waited for. Call it after Restart to know the node has rejoined.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	poll(t, "JetStream cluster ready", c.ready)
}

func (c *Cluster) ready() error {
	var (
		running []*server.Server
		leader  *server.Server
	)
	for _, s := range c.nodes {
		srv := s.Server()
		if srv == nil {
			continue
		}
		// Besides the metadata layer, healthz checks that every stream and
		// consumer placed on the node has caught up; a node that restarted
		// a moment ago may otherwise still look current from before.
		if h := srv.Healthz(nil); h.StatusCode != http.StatusOK {
			return fmt.Errorf("node %s unhealthy: %s", s.Name(), h.Error)
		}
		if srv.JetStreamIsLeader() {
			leader = srv
		}
		running = append(running, srv)
	}
	if len(running) == 0 {
		return errors.New("no node is running")
	}
	if leader == nil {
		return errors.New("no metadata leader")
	}
	// The followers may believe they are current before the leader has
	// heard from them; it is the leader that places streams.
	info, err := leader.Jsz(&server.JSzOptions{LeaderOnly: true})
	if err != nil {
		return fmt.Errorf("metadata leader %s: %w", leader.Name(), err)
	}
	if info.Meta == nil {
		return fmt.Errorf("metadata leader %s reports no cluster", leader.Name())
	}
	// The leader places new streams only on peers it has JetStream
	// statistics from, which a node sends a moment after it joins.
	placeable := leader.JetStreamClusterPeers()
	for _, srv := range running {
		if !slices.Contains(placeable, srv.Name()) {
			return fmt.Errorf("metadata leader %s cannot place streams on %s yet", leader.Name(), srv.Name())
		}
		if srv == leader {
			continue
		}
		i := slices.IndexFunc(info.Meta.Replicas, func(p *server.PeerInfo) bool { return p.Name == srv.Name() })
		if i < 0 {
			return fmt.Errorf("metadata leader %s does not know node %s", leader.Name(), srv.Name())
		}
		if p := info.Meta.Replicas[i]; !p.Current || p.Offline {
			return fmt.Errorf("metadata leader %s: node %s current=%t offline=%t", leader.Name(), p.Name, p.Current, p.Offline)
		}
	}
	return nil
}

// StreamLeader returns the index of the node that leads stream, as the
// JetStream API's stream info names it. While the stream has no leader, or
// names one that is shut down (an answer from before an election), it
// keeps asking.
func (c *Cluster) StreamLeader(t testing.TB, stream string) int {
	t.Helper()
	var leader int
	c.pollStream(t, stream, "leader of stream "+stream, func(info *jetstream.StreamInfo) error {
		i, err := c.leaderOf(info)
		leader = i
		return err
	})
	return leader
}

// WaitStreamCurrent waits until stream has a leader and every replica on a
// running node is current with it. Call it after Restart before relying on
// the restarted node's copy, e.g. before killing another node.
func (c *Cluster) WaitStreamCurrent(t testing.TB, stream string) {
	t.Helper()
	c.pollStream(t, stream, "replicas of stream "+stream+" current", func(info *jetstream.StreamInfo) error {
		if _, err := c.leaderOf(info); err != nil {
			return err
		}
		for _, p := range info.Cluster.Replicas {
			i := c.index(p.Name)
			if i < 0 {
				return fmt.Errorf("replica on unknown node %q", p.Name)
			}
			if c.nodes[i].Server() == nil {
				continue
			}
			if !p.Current || p.Offline {
				return fmt.Errorf("replica on %s: current=%t offline=%t lag=%d", p.Name, p.Current, p.Offline, p.Lag)
			}
		}
		return nil
	})
}

// KillLeader shuts down the node that leads stream, keeping its store and
// ports, and returns its index; Node(i).Restart brings it back.
//
// It is an outage, not a crash: nats-server's Shutdown first steps down the
// raft groups the node leads, so the others elect a leader within
// milliseconds instead of after the 4–9s election timeout a crashed leader
// costs (a timeout the server does not let an embedder change). Crash tests
// need a nats-server process to kill.
func (c *Cluster) KillLeader(t testing.TB, stream string) int {
	t.Helper()
	i := c.StreamLeader(t, stream)
	c.nodes[i].Shutdown()
	return i
}

// leaderOf returns the index of the running node that info names leader.
func (c *Cluster) leaderOf(info *jetstream.StreamInfo) (int, error) {
	if info.Cluster == nil {
		return 0, errors.New("stream info has no cluster section")
	}
	name := info.Cluster.Leader
	if name == "" {
		return 0, errors.New("stream has no leader")
	}
	i := c.index(name)
	if i < 0 {
		return 0, fmt.Errorf("leader %q is not a node of this cluster", name)
	}
	if c.nodes[i].Server() == nil {
		return 0, fmt.Errorf("leader %s is shut down", name)
	}
	return i, nil
}

func (c *Cluster) index(name string) int {
	return slices.IndexFunc(c.nodes, func(s *Server) bool { return s.Name() == name })
}

// pollStream asks for stream's info until check accepts it.
func (c *Cluster) pollStream(t testing.TB, stream, what string, check func(*jetstream.StreamInfo) error) {
	t.Helper()
	nc, err := nats.Connect(c.URL(), nats.Name("natstest "+t.Name()), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("%s: connect to %s: %v", what, c.URL(), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), infoTimeout)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		return check(s.CachedInfo())
	})
}

// poll calls check until it returns nil and fails t with check's last error
// after clusterTimeout.
func poll(t testing.TB, what string, check func() error) {
	t.Helper()
	testsync.Eventually(t, clusterTimeout, func() string {
		if err := check(); err != nil {
			return what + ": " + err.Error()
		}
		return ""
	})
}
