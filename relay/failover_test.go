package relay

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPGHosts: the hosts of --pg-url, each once, in order, however many
// times sslmode=prefer repeats them.
func TestPGHosts(t *testing.T) {
	cfg, err := pgx.ParseConfig("postgres://u@db1:5432,db2:5433,db3/app?sslmode=prefer&target_session_attrs=read-write")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range pgHosts(cfg) {
		got = append(got, fmt.Sprintf("%s:%d", h.Host, h.Port))
	}
	if want := "db1:5432 db2:5433 db3:5432"; strings.Join(got, " ") != want {
		t.Errorf("pgHosts = %v, want %s", got, want)
	}
}
