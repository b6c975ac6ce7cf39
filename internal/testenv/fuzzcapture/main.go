// Command fuzzcapture records real pgoutput messages from a private
// PostgreSQL cluster and writes them as seed corpus files for the decoder's
// fuzz targets, so fuzzing starts from what servers really send:
//
//	go run ./internal/testenv/fuzzcapture -out decoder/testdata/fuzz
//
// It captures one protocol 1 session (FuzzDecode: one file per message) and
// one protocol 2 session with in-progress streaming, logical messages and
// aborts (FuzzDecodeV2: the session as length-prefixed frames).
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testenv/pgcluster"
	"github.com/outboxd/outboxd/migrations"
	"github.com/outboxd/outboxd/replication"
)

func main() {
	out := flag.String("out", "decoder/testdata/fuzz", "fuzz corpus folder (holds FuzzDecode/ and FuzzDecodeV2/)")
	flag.Parse()
	if err := run(context.Background(), *out); err != nil {
		fmt.Fprintln(os.Stderr, "fuzzcapture:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string) error {
	pg, err := pgcluster.Start(ctx, pgcluster.Options{ExtraConf: map[string]string{"logical_decoding_work_mem": "64kB"}})
	if err != nil {
		return err
	}
	defer pg.Close()
	dsn := pg.DSN("postgres")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := migrations.Apply(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE business (id serial PRIMARY KEY, note text); ALTER PUBLICATION outboxd ADD TABLE business"); err != nil {
		return err
	}
	v1, err := capture(ctx, conn, dsn, "capture_v1", false)
	if err != nil {
		return err
	}
	// A few of each message type: thousands of alike Inserts add nothing.
	perType := map[byte]int{}
	for i, m := range v1 {
		if perType[m[0]]++; perType[m[0]] > 6 {
			continue
		}
		if err := writeSeed(filepath.Join(out, "FuzzDecode", fmt.Sprintf("captured-v1-%c-%d", m[0], i)), m); err != nil {
			return err
		}
	}
	v2, err := capture(ctx, conn, dsn, "capture_v2", true)
	if err != nil {
		return err
	}
	// Frames hold at most 64 KiB each: split the session into files of at
	// most 64 KiB, which keeps each fuzz input small enough to mutate.
	var frames []byte
	part := 0
	for _, m := range v2 {
		if len(m) > 0xffff {
			continue
		}
		if len(frames)+2+len(m) > 64<<10 {
			if err := writeSeed(filepath.Join(out, "FuzzDecodeV2", fmt.Sprintf("captured-v2-%d", part)), frames); err != nil {
				return err
			}
			frames, part = nil, part+1
		}
		frames = binary.BigEndian.AppendUint16(frames, uint16(len(m)))
		frames = append(frames, m...)
	}
	if err := writeSeed(filepath.Join(out, "FuzzDecodeV2", fmt.Sprintf("captured-v2-%d", part)), frames); err != nil {
		return err
	}
	fmt.Printf("captured %d protocol 1 messages and %d protocol 2 messages into %s\n", len(v1), len(v2), out)
	return nil
}

// workload is what both sessions decode: small and large transactions,
// headers, NULLs, other tables, a rollback, a subtransaction rollback and
// logical messages.
var workload = []string{
	`INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES
	   (gen_random_uuid(), 'order', '1', 'Created', '{"n": 1, "s": "é\u00e9"}', '{"traceparent": "00-a-b-01", "tenant": "acme"}')`,
	`INSERT INTO business (note) VALUES ('x'), (NULL)`,
	`BEGIN; INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
	   SELECT gen_random_uuid(), 'order', n::text, 'Paid', jsonb_build_object('n', n, 'pad', repeat('p', 200)) FROM generate_series(1, 600) n; COMMIT`,
	`BEGIN; INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
	   SELECT gen_random_uuid(), 'order', n::text, 'Lost', '{}' FROM generate_series(1, 400) n; ROLLBACK`,
	`BEGIN; INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
	   SELECT gen_random_uuid(), 'invoice', n::text, 'Kept', jsonb_build_object('pad', repeat('k', 150)) FROM generate_series(1, 400) n;
	 SAVEPOINT s; INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
	   SELECT gen_random_uuid(), 'invoice', n::text, 'Undone', jsonb_build_object('pad', repeat('u', 150)) FROM generate_series(1, 400) n;
	 ROLLBACK TO SAVEPOINT s; COMMIT`,
	`SELECT pg_logical_emit_message(false, 'outboxd-heartbeat', now()::text)`,
	`BEGIN; SELECT pg_logical_emit_message(true, 'outbox', '{"type": "x"}'); INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload) VALUES (gen_random_uuid(), 'c', '9', 'T', '[1, 2]'); COMMIT`,
	`ALTER TABLE outbox ADD COLUMN tenant text`,
	`INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, tenant) VALUES (gen_random_uuid(), 'order', '2', 'Created', '"s"', 't1')`,
	`TRUNCATE business`,
	`ALTER TABLE outbox DROP COLUMN tenant`,
}

// capture creates a slot, runs the workload and returns every pgoutput
// message the slot sends for it.
func capture(ctx context.Context, conn *pgx.Conn, dsn, slot string, streaming bool) ([][]byte, error) {
	stream, err := replication.Connect(ctx, replication.Config{ConnString: dsn, Slot: slot, Streaming: streaming, Messages: true})
	if err != nil {
		return nil, err
	}
	start, err := stream.CreateSlot(ctx)
	if err != nil {
		return nil, err
	}
	for _, sql := range workload {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return nil, fmt.Errorf("%s: %w", sql, err)
		}
	}
	var end pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()").Scan(&end); err != nil {
		return nil, err
	}
	if err := stream.Start(ctx, start, func() pglogrepl.LSN { return start }); err != nil {
		return nil, err
	}
	batches := make(chan []replication.Message, 8)
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- stream.Run(runCtx, batches) }()
	var out [][]byte
	for batch := range batches {
		for _, m := range batch {
			if m.Data != nil {
				out = append(out, m.Data)
			}
			if m.ServerWALEnd >= end && m.Data == nil {
				cancel() // a keepalive past the workload: everything was sent
			}
		}
	}
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	if err := stream.Close(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// writeSeed writes data in the "go test fuzz v1" corpus format.
func writeSeed(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte("go test fuzz v1\n[]byte("+strconv.Quote(string(data))+")\n"), 0o644)
}
