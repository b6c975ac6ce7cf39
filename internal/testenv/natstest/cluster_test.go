package natstest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestStartCluster(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, 3, WithSyncAlways())
	t.Logf("3-node cluster ready in %s", time.Since(start).Round(time.Millisecond))

	urls := strings.Split(c.URL(), ",")
	if len(urls) != 3 || c.Len() != 3 {
		t.Fatalf("URL() = %q, Len() = %d; want 3 nodes", c.URL(), c.Len())
	}
	for i := range c.Len() {
		n := c.Node(i)
		srv := n.Server()
		if want := fmt.Sprintf("n%d", i+1); n.Name() != want || srv.Name() != want {
			t.Errorf("node %d is named %q (server %q), want %q", i, n.Name(), srv.Name(), want)
		}
		if urls[i] != n.URL() {
			t.Errorf("URL()[%d] = %s, want %s", i, urls[i], n.URL())
		}
		if srv.ClusterName() != ClusterName || !srv.JetStreamIsClustered() {
			t.Errorf("node %s: cluster %q, clustered %t", n.Name(), srv.ClusterName(), srv.JetStreamIsClustered())
		}
		if !srv.JetStreamConfig().SyncAlways {
			t.Errorf("node %s: the option did not reach it", n.Name())
		}
		if peers := srv.JetStreamClusterPeers(); srv.JetStreamIsLeader() && len(peers) != 3 {
			t.Errorf("metadata leader %s sees peers %v, want 3", n.Name(), peers)
		}
	}

	// A restarted node keeps its client and route ports.
	n := c.Node(1)
	url, route := n.URL(), n.Server().ClusterAddr().String()
	n.Shutdown()
	n.Restart(t)
	c.WaitReady(t)
	if n.URL() != url || n.Server().ClusterAddr().String() != route {
		t.Errorf("after restart: %s, route %s; want %s, route %s", n.URL(), n.Server().ClusterAddr(), url, route)
	}
}

// TestClusterFailover kills the stream's leader twice in a row and checks
// that a new one is elected, publishing goes on, and every message is on the
// restarted node once it is back.
func TestClusterFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := StartCluster(t, 3)
	js := c.JetStream(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"},
		Storage: jetstream.FileStorage, Replicas: 3}); err != nil {
		t.Fatal(err)
	}

	var want []string
	publish := func(n int) {
		t.Helper()
		for range n {
			want = append(want, fmt.Sprintf("m%d", len(want)))
			publishRetry(ctx, t, js, want[len(want)-1])
		}
	}
	publish(10)

	for round := 1; round <= 2; round++ {
		start := time.Now()
		killed := c.KillLeader(t, "EVENTS")
		leader := c.StreamLeader(t, "EVENTS")
		t.Logf("round %d: killed leader %s; %s leads after %s", round, c.Node(killed).Name(),
			c.Node(leader).Name(), time.Since(start).Round(time.Millisecond))
		if leader == killed {
			t.Fatalf("round %d: the killed node %s still leads", round, c.Node(killed).Name())
		}

		publish(10) // on two nodes
		start = time.Now()
		c.Node(killed).Restart(t)
		c.WaitReady(t)
		c.WaitStreamCurrent(t, "EVENTS")
		t.Logf("round %d: %s current again %s after restart", round, c.Node(killed).Name(),
			time.Since(start).Round(time.Millisecond))

		info := streamInfo(ctx, t, js, "EVENTS")
		if got := len(info.Cluster.Replicas); got != 2 {
			t.Errorf("round %d: %d replicas besides the leader, want 2", round, got)
		}
		back := slices.IndexFunc(info.Cluster.Replicas, func(p *jetstream.PeerInfo) bool {
			return p.Name == c.Node(killed).Name()
		})
		if back < 0 || !info.Cluster.Replicas[back].Current || info.Cluster.Replicas[back].Offline {
			t.Errorf("round %d: restarted %s is not a current replica: %+v", round, c.Node(killed).Name(), info.Cluster)
		}
		checkMessages(ctx, t, js, want)
		checkLocalCopy(t, c.Node(killed), "EVENTS", uint64(len(want)))
	}
	publish(5) // all three nodes back
	checkMessages(ctx, t, js, want)
}

// publishRetry publishes data until the stream acknowledges it. The message
// ID makes a retry of a publish that was stored but not acknowledged a
// duplicate, so the stream holds data once.
func publishRetry(ctx context.Context, t *testing.T, js jetstream.JetStream, data string) {
	t.Helper()
	var err error
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = js.Publish(pctx, "events.x", []byte(data), jetstream.WithMsgID(data))
		cancel()
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("publish %s: %v (last error)", data, err)
}

func streamInfo(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo()
}

// checkMessages reads the whole stream back by sequence and compares it
// with want. (A fresh consumer is no good here: its pull subject reaches the
// other nodes a moment after it is created, and a pull in between finds no
// responders.)
func checkMessages(ctx context.Context, t *testing.T, js jetstream.JetStream, want []string) {
	t.Helper()
	s, err := js.Stream(ctx, "EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.CachedInfo().State; st.Msgs != uint64(len(want)) || st.LastSeq != uint64(len(want)) {
		t.Fatalf("stream holds %d messages up to seq %d, want %d", st.Msgs, st.LastSeq, len(want))
	}
	for i, w := range want {
		m, err := s.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatalf("get message %d: %v", i+1, err)
		}
		if string(m.Data) != w || m.Header.Get(nats.MsgIdHdr) != w {
			t.Fatalf("message %d = %q with ID %q, want %q", i+1, m.Data, m.Header.Get(nats.MsgIdHdr), w)
		}
	}
}

// checkLocalCopy checks the stream's copy on node s itself, not the one the
// leader serves to clients.
func checkLocalCopy(t *testing.T, s *Server, stream string, want uint64) {
	t.Helper()
	info, err := s.Server().Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range info.AccountDetails {
		for _, sd := range a.Streams {
			if sd.Name == stream {
				if sd.State.Msgs != want || sd.State.LastSeq != want {
					t.Errorf("node %s holds %d messages up to seq %d, want %d", s.Name(), sd.State.Msgs, sd.State.LastSeq, want)
				}
				return
			}
		}
	}
	t.Errorf("node %s holds no copy of stream %s", s.Name(), stream)
}
