package relay

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/replication"
)

// TestPGHosts: the hosts of --pg-url, each once, in order, each with its
// TLS and plain attempts of sslmode=prefer.
func TestPGHosts(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://u@db1:5432,db2:5433,db3/app?sslmode=prefer&target_session_attrs=read-write")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tries := range pgHosts(cfg) {
		tls := ""
		for _, try := range tries {
			tls += fmt.Sprint(try.TLSConfig != nil, " ")
		}
		got = append(got, fmt.Sprintf("%s:%d(%s)", tries[0].Host, tries[0].Port, strings.TrimSpace(tls)))
	}
	if want := "db1:5432(true false) db2:5433(true false) db3:5432(true false)"; strings.Join(got, " ") != want {
		t.Errorf("pgHosts = %v, want %s", got, want)
	}
}

// TestBackfillSteps: the recovery from the outbox table after a slot is
// lost names backfill --since only where it can be exact; in
// logical-message mode it refuses (the events were only in WAL), and
// without created_at it asks for --where instead of guessing.
func TestBackfillSteps(t *testing.T) {
	saved := checkpoint.Checkpoint{SavedAt: time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)}
	noCreatedAt := DefaultConfig()
	noCreatedAt.Columns.CreatedAt = ""
	messagesOnly := DefaultConfig()
	messagesOnly.Table = replication.Table{}
	tests := []struct {
		name      string
		cfg       Config
		want, not []string
	}{
		{"default", DefaultConfig(), []string{"(1) first", "(2) publish the rows created since an hour before", "outboxd backfill --since 2026-12-06T13:00:00Z", "(3) start outboxd run"}, nil},
		{"no created_at", noCreatedAt, []string{"(2) publish the rows written since the checkpoint was saved (2026-12-06T14:00:00Z)", "--where"}, []string{"--since 2026"}},
		{"logical messages", messagesOnly, []string{"only in the lost slot's WAL", "emit them again"}, []string{"outboxd backfill"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := backfillSteps(tt.cfg, saved, "first")
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("steps lack %q: %s", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("steps say %q: %s", n, got)
				}
			}
		})
	}
}
