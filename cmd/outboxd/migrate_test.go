package main

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestMigrateWALLevel: migrate warns on stderr, in one line naming the
// value and the fix, when wal_level is not logical, and migrates all the
// same; on a server with wal_level=logical it says nothing of it.
func TestMigrateWALLevel(t *testing.T) {
	tests := []struct {
		name string
		pg   func(t testing.TB) *pgtest.Server
		want string // on stderr; "" for nothing
	}{
		{"replica", func(t testing.TB) *pgtest.Server { return pgtest.Start(t, pgtest.WithConf("wal_level", "replica")) },
			`outboxd: warning: server setting wal_level is "replica", logical replication needs "logical": outboxd run refuses to start ` +
				"and no replication slot can be created; fix: ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL\n"},
		{"logical", pgtest.Shared, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := tt.pg(t).NewDatabase(t)
			out, stderr, err := execute(t, newRootCommand(), []string{"migrate", "--pg-url", dsn}, nil)
			if err != nil {
				t.Fatalf("migrate: %v", err)
			}
			if stderr != tt.want {
				t.Errorf("migrate's stderr = %q, want %q", stderr, tt.want)
			}
			if !strings.Contains(out, "applied 0001_outbox.sql") {
				t.Errorf("migrate printed %q, want it to apply the migrations", out)
			}
		})
	}
}
