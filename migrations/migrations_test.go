package migrations_test

import (
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/migrations"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestApply applies the migrations twice: the second run changes nothing,
// and the table has the columns and types the README documents.
func TestApply(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	applied, err := migrations.Apply(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0001_outbox.sql", "0002_outbox_emit.sql"}; !reflect.DeepEqual(applied, want) {
		t.Fatalf("first Apply = %v, want %v", applied, want)
	}
	again, err := migrations.Apply(ctx, conn)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Apply = %v, %v; want nothing applied", again, err)
	}

	rows, err := conn.Query(ctx, `SELECT column_name, data_type, is_nullable FROM information_schema.columns
		WHERE table_schema = 'public' AND table_name = 'outbox' ORDER BY ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	type column struct{ Name, Type, Nullable string }
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[column])
	if err != nil {
		t.Fatal(err)
	}
	want := []column{
		{"id", "uuid", "NO"}, {"aggregate_type", "text", "NO"}, {"aggregate_id", "text", "NO"},
		{"event_type", "text", "NO"}, {"payload", "jsonb", "NO"}, {"headers", "jsonb", "YES"},
		{"created_at", "timestamp with time zone", "NO"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("outbox columns = %v, want %v", got, want)
	}
	var inserts, updates bool
	if err := conn.QueryRow(ctx, `SELECT pubinsert, pubupdate FROM pg_publication p
		JOIN pg_publication_tables t ON t.pubname = p.pubname
		WHERE p.pubname = 'outboxd' AND t.schemaname = 'public' AND t.tablename = 'outbox'`).Scan(&inserts, &updates); err != nil {
		t.Fatalf("publication outboxd on public.outbox: %v", err)
	}
	if !inserts || updates {
		t.Errorf("publication publishes inserts=%v updates=%v, want inserts only", inserts, updates)
	}
}

// TestAllOrdered checks the embedded files are numbered without gaps.
func TestAllOrdered(t *testing.T) {
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range all {
		if m.Version != i+1 {
			t.Errorf("migration %d is %s (version %d): versions must run 1, 2, 3, ...", i, m.Name, m.Version)
		}
	}
}
