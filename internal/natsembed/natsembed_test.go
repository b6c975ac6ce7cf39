package natsembed

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

func TestStart(t *testing.T) {
	var logs bytes.Buffer
	s, err := Start(context.Background(), Config{StoreDir: t.TempDir(), Logger: zerolog.New(&logs).Level(zerolog.InfoLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.JetStreamEnabled() {
		t.Error("JetStream is not enabled")
	}
	if !strings.HasPrefix(s.Addr().String(), "127.0.0.1:") {
		t.Errorf("listening on %s, want 127.0.0.1", s.Addr())
	}
	if !strings.Contains(logs.String(), `"component":"nats-server"`) {
		t.Errorf("server log did not reach the Logger: %q", logs.String())
	}
}

func TestOptionsNeedStoreDir(t *testing.T) {
	if _, err := (Config{}).Options(); err == nil {
		t.Error("Options without StoreDir: err = nil")
	}
}

func TestOptionsCluster(t *testing.T) {
	dir := t.TempDir()
	routes := []string{"nats-route://127.0.0.1:7001", "nats-route://127.0.0.1:7002"}
	tests := []struct {
		name    string
		cfg     Config
		want    func(*testing.T, *server.Options)
		wantErr string
	}{
		{
			name: "standalone has no cluster",
			cfg:  Config{StoreDir: dir},
			want: func(t *testing.T, o *server.Options) {
				if o.Cluster.Name != "" || o.Cluster.Port != 0 || len(o.Routes) != 0 || o.ServerName != "" {
					t.Errorf("cluster options set: %+v, routes %v, name %q", o.Cluster, o.Routes, o.ServerName)
				}
			},
		},
		{
			name: "node",
			cfg: Config{StoreDir: dir, ServerName: "n1",
				Cluster: ClusterConfig{Name: "c", Port: 7001, Routes: routes}},
			want: func(t *testing.T, o *server.Options) {
				if o.ServerName != "n1" || o.Cluster.Name != "c" || o.Cluster.Port != 7001 || o.Cluster.Host != "127.0.0.1" {
					t.Errorf("options = name %q, cluster %+v", o.ServerName, o.Cluster)
				}
				if len(o.Routes) != 2 || o.Routes[1].Host != "127.0.0.1:7002" {
					t.Errorf("routes = %v", o.Routes)
				}
			},
		},
		{
			name: "random route port",
			cfg:  Config{StoreDir: dir, ServerName: "n1", Cluster: ClusterConfig{Name: "c", Routes: routes}},
			want: func(t *testing.T, o *server.Options) {
				if o.Cluster.Port != server.RANDOM_PORT {
					t.Errorf("cluster port = %d, want RANDOM_PORT", o.Cluster.Port)
				}
			},
		},
		{
			name:    "routes without a cluster name",
			cfg:     Config{StoreDir: dir, Cluster: ClusterConfig{Routes: routes}},
			wantErr: "need Cluster.Name",
		},
		{
			name:    "cluster without a server name",
			cfg:     Config{StoreDir: dir, Cluster: ClusterConfig{Name: "c", Routes: routes}},
			wantErr: "ServerName is required",
		},
		{
			name:    "cluster without routes",
			cfg:     Config{StoreDir: dir, ServerName: "n1", Cluster: ClusterConfig{Name: "c"}},
			wantErr: "Cluster.Routes is required",
		},
		{
			name:    "route that is not a route URL",
			cfg:     Config{StoreDir: dir, ServerName: "n1", Cluster: ClusterConfig{Name: "c", Routes: []string{"127.0.0.1:7001"}}},
			wantErr: "not a nats-route://host:port URL",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := tt.cfg.Options()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want(t, o)
		})
	}
}

// A lone node starts with its route listener up; forming a cluster is
// natstest's job.
func TestStartClusterNode(t *testing.T) {
	s, err := Start(context.Background(), Config{StoreDir: t.TempDir(), ServerName: "n1",
		Cluster: ClusterConfig{Name: "solo", Routes: []string{"nats-route://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if s.Name() != "n1" || s.ClusterName() != "solo" {
		t.Errorf("name %q, cluster %q; want n1, solo", s.Name(), s.ClusterName())
	}
	if a := s.ClusterAddr(); a == nil || !a.IP.IsLoopback() || a.Port == 0 {
		t.Errorf("route listener on %v, want 127.0.0.1 and a port", a)
	}
}
