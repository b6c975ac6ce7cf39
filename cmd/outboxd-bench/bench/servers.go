package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/outboxd/outboxd/internal/testenv/pgcluster"
)

// pgConf tunes the private cluster for a benchmark: checkpoints do not
// interrupt a backlog of a million rows, and pg_stat_statements counts the
// relays' queries. (pgcluster already turns fsync off: a throwaway cluster
// need not survive an OS crash, and the same holds for every figure here.)
var pgConf = map[string]string{
	"shared_preload_libraries": "pg_stat_statements",
	"max_wal_size":             "8GB",
	"checkpoint_timeout":       "30min",
	"shared_buffers":           "256MB",
	"max_connections":          "50",
}

// startPostgres starts a private cluster in dir.
func startPostgres(ctx context.Context, dir string) (*pgcluster.Cluster, error) {
	return pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "postgres"), ExtraConf: pgConf})
}

// postmasterPID returns the pid of the server conn is connected to, if it
// runs on this machine (its backend's parent), else 0.
func postmasterPID(ctx context.Context, conn *pgx.Conn) int {
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0
	}
	st, err := readStat(backend)
	if err != nil {
		return 0
	}
	return st.ppid
}

// natsServer is nats-server running as a process of its own, so its CPU
// time and memory are its own and not the benchmark driver's.
type natsServer struct {
	*proc
	url string
}

// startNATS starts bin with JetStream storing in dir; syncAlways sets
// sync_interval: always (fsync every write).
func startNATS(ctx context.Context, bin, dir string, syncAlways bool) (*natsServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n", port, filepath.Join(dir, "jetstream"))
	if syncAlways {
		conf += "  sync_interval: always\n"
	}
	conf += "}\n"
	confFile := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	p, err := startProc(filepath.Join(dir, "nats-server.log"), bin, "-c", confFile)
	if err != nil {
		return nil, err
	}
	s := &natsServer{proc: p, url: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	if err := s.waitReady(ctx); err != nil {
		return nil, errors.Join(err, s.stop(10*time.Second))
	}
	return s, nil
}

func (s *natsServer) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(s.url, nats.Timeout(time.Second))
		if err == nil {
			nc.Close()
			return nil
		}
		if s.exited() {
			return s.failure()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server not accepting clients at %s after 30s: %w", s.url, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
