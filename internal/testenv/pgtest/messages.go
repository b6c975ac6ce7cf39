package pgtest

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// MessageSlot creates a pgoutput slot named slot on conn's database and
// returns a function that peeks (without consuming) at the contents of the
// transactional logical decoding messages with the given prefix committed
// since, in commit order. Tests of producers use it to see what outboxd
// would receive without running outboxd.
func MessageSlot(t testing.TB, conn *pgx.Conn, slot, prefix string) func() []string {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		t.Helper()
		// publication_names is required; the messages do not depend on it.
		rows, err := conn.Query(ctx, `SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
			'proto_version', '1', 'publication_names', 'outboxd', 'messages', 'true')`, slot)
		if err != nil {
			t.Fatal(err)
		}
		all, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, data := range all {
			// 'M', flags (1 = transactional), lsn (8 bytes), prefix\0,
			// content length (4 bytes), content.
			if len(data) < 10 || data[0] != 'M' || data[1] != 1 {
				continue
			}
			p, rest, ok := strings.Cut(string(data[10:]), "\x00")
			if ok && p == prefix && len(rest) >= 4 {
				out = append(out, rest[4:])
			}
		}
		return out
	}
}
