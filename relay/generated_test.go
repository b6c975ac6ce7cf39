package relay

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// generatedTable is an outbox table whose event type a generated column
// derives from the payload, as a user might write it, with two more
// generated columns: tenant (a subject placeholder in some cases) and
// note, which outboxd never reads.
const generatedTable = `CREATE TABLE orders_outbox (
	id uuid PRIMARY KEY,
	aggregate_type text NOT NULL,
	aggregate_id text NOT NULL,
	kind text,
	payload jsonb NOT NULL,
	event_type text GENERATED ALWAYS AS (payload->>'type') STORED,
	tenant text GENERATED ALWAYS AS ('acme') STORED,
	note text GENERATED ALWAYS AS (aggregate_type || '/' || aggregate_id) STORED)`

// TestGeneratedColumns: a mapped column or subject placeholder that is a
// generated column pgoutput does not send stops outboxd at start, with the
// column, the reason and the fix, instead of at the first row with a
// column that seems not to exist. A generated column outboxd does not read
// is fine, and so, on PostgreSQL 18, is a stored one the publication
// publishes (publish_generated_columns = stored).
func TestGeneratedColumns(t *testing.T) {
	pg := pgtest.Shared(t)
	version := serverMajor(t, pg.DSN("postgres"))
	// Why the server does not send a generated column.
	why := "the pgoutput plugin of PostgreSQL " + strconv.Itoa(version) + " never sends generated columns (PostgreSQL 18 sends stored ones when the publication sets publish_generated_columns = stored)"
	if version >= 18 {
		why = `publication "outboxd" has publish_generated_columns = none, so pgoutput leaves stored generated columns out`
	}
	const eventTypeGenerated = "id=id,aggregate_type=aggregate_type,aggregate_id=aggregate_id,event_type=event_type,payload=payload"
	const eventTypePlain = "id=id,aggregate_type=aggregate_type,aggregate_id=aggregate_id,event_type=kind,payload=payload"
	for _, tt := range []struct {
		name       string
		minVersion int    // the server major the case needs, 0 for any
		setup      string // after generatedTable
		columns    string
		subject    string
		wantErr    []string // nil: the preflight passes
	}{
		{
			name: "mapped generated column", setup: `CREATE PUBLICATION outboxd FOR TABLE orders_outbox`,
			columns: eventTypeGenerated, subject: "orders.{event_type}",
			wantErr: []string{
				`column "event_type" of table "public"."orders_outbox"`, "is a generated column",
				"outboxd reads (--columns event_type=event_type)", "the replication stream does not carry", why,
				"read a plain column instead, filled by the writer or by a BEFORE INSERT trigger",
				`ALTER PUBLICATION "outboxd" SET (publish_generated_columns = stored)`,
			},
		},
		{
			name: "generated subject placeholder", setup: `CREATE PUBLICATION outboxd FOR TABLE orders_outbox`,
			columns: eventTypePlain, subject: "orders.{tenant}.{event_type}",
			wantErr: []string{`column "tenant" of table "public"."orders_outbox"`, "is a generated column",
				"outboxd reads (--subject placeholder {tenant})", why},
		},
		{
			name: "generated column not read", setup: `CREATE PUBLICATION outboxd FOR TABLE orders_outbox`,
			columns: eventTypePlain, subject: "orders.{aggregate_type}",
		},
		{
			// The Relation message lacks the column, so the placeholder
			// reads the field of that name, mapped to kind.
			name: "placeholder naming a generated column and a mapped field", setup: `CREATE PUBLICATION outboxd FOR TABLE orders_outbox`,
			columns: eventTypePlain, subject: "orders.{event_type}",
		},
		{
			name: "PostgreSQL 18, publish_generated_columns = stored", minVersion: 18,
			setup:   `CREATE PUBLICATION outboxd FOR TABLE orders_outbox WITH (publish_generated_columns = stored)`,
			columns: eventTypeGenerated, subject: "orders.{tenant}.{event_type}",
		},
		{
			name: "PostgreSQL 18, publish_generated_columns = none", minVersion: 18,
			setup:   `CREATE PUBLICATION outboxd FOR TABLE orders_outbox WITH (publish_generated_columns = none)`,
			columns: eventTypeGenerated, subject: "orders.{event_type}",
			wantErr: []string{`column "event_type"`, `publication "outboxd" has publish_generated_columns = none`,
				`ALTER PUBLICATION "outboxd" SET (publish_generated_columns = stored)`},
		},
		{
			name: "PostgreSQL 18, a column list naming it", minVersion: 18,
			setup:   `CREATE PUBLICATION outboxd FOR TABLE orders_outbox (id, aggregate_type, aggregate_id, kind, payload, event_type)`,
			columns: eventTypeGenerated, subject: "orders.{event_type}",
		},
		{
			name: "PostgreSQL 18, virtual generated column", minVersion: 18,
			setup: `ALTER TABLE orders_outbox ADD COLUMN region text GENERATED ALWAYS AS ('eu') VIRTUAL;
				CREATE PUBLICATION outboxd FOR TABLE orders_outbox WITH (publish_generated_columns = stored)`,
			columns: eventTypePlain, subject: "orders.{region}.{event_type}",
			wantErr: []string{`column "region"`, "is a virtual generated column", "pgoutput never sends virtual generated columns"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if version < tt.minVersion {
				t.Skipf("needs PostgreSQL %d, the test server is %d: scripts/test-versions %d runs it (OUTBOXD_TEST_PG_VERSION)",
					tt.minVersion, version, tt.minVersion)
			}
			dsn := pg.NewDatabase(t)
			pg.Exec(t, dsn, generatedTable+";\n"+tt.setup)
			cfg := generatedConfig(t, dsn, tt.columns, tt.subject)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _, err := preflight(ctx, cfg)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("preflight = %v, want no error", err)
				}
				return
			}
			var pe *replication.PreflightError
			if !errors.As(err, &pe) || !Permanent(err) {
				t.Fatalf("preflight = %v, want a *replication.PreflightError", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// generatedConfig is the relay's configuration for orders_outbox.
func generatedConfig(t testing.TB, dsn, columns, subject string) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.PGURL, cfg.Table = dsn, replication.Table{Schema: "public", Name: "orders_outbox"}
	var err error
	if cfg.Columns, err = decoder.ParseColumns(columns); err != nil {
		t.Fatal(err)
	}
	if cfg.Subject, err = sink.ParseTemplate(subject); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// serverMajor is the major version of the server at dsn.
func serverMajor(t testing.TB, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
