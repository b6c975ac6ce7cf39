package replication

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
)

func TestValidSlotName(t *testing.T) {
	tests := []struct {
		name    string
		wantErr bool
	}{
		{"outboxd", false},
		{"orders_2", false},
		{strings.Repeat("a", 63), false},
		{"", true},
		{"Outboxd", true},
		{"out-boxd", true},
		{"out boxd", true},
		{"outboxd;drop", true},
		{strings.Repeat("a", 64), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidSlotName(tt.name)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ValidSlotName(%q) = %v, want error %v", tt.name, err, tt.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), `"`+tt.name+`"`) || !strings.Contains(err.Error(), "lower-case letters")) {
				t.Errorf("error %q does not name the value and the rule", err)
			}
		})
	}
}

// holdSlot streams from slot on a replication connection of its own, as an
// outboxd would, until the test ends or the server terminates it. It
// returns the walsender's PID.
func holdSlot(t *testing.T, dsn string, conn *pgx.Conn, slot string) int32 {
	t.Helper()
	ctx := context.Background()
	stream, err := Connect(ctx, Config{ConnString: dsn, Slot: slot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.conn.Close(context.Background()) })
	if err := stream.Start(ctx, 0, func() pglogrepl.LSN { return 0 }); err != nil {
		t.Fatal(err)
	}
	var pid int32
	testsync.Eventually(t, 10*time.Second, func() string {
		if r := readSlot(t, conn, slot); r.active {
			pid = r.activePID
			return ""
		}
		return "slot " + slot + " is not active"
	})
	return pid
}

func TestSlotLifecycle(t *testing.T) {
	dsn, conn := pgtest.Shared(t).MigratedDatabase(t)
	ctx := context.Background()
	slot := uniqueSlot()
	cfg := Config{ConnString: dsn, Slot: slot}

	if _, err := InspectSlot(ctx, conn, slot); !errors.Is(err, ErrSlotNotFound) || !strings.Contains(err.Error(), "outboxd slot create --slot "+slot) {
		t.Fatalf("InspectSlot of a missing slot = %v, want ErrSlotNotFound with the command that creates it", err)
	}
	consistent, err := CreateSlot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1", slot)
	}) //nolint:errcheck
	if _, err := CreateSlot(ctx, cfg); !errors.Is(err, ErrSlotExists) || !strings.Contains(err.Error(), `"`+slot+`"`) || !strings.Contains(err.Error(), "outboxd slot drop --slot "+slot) {
		t.Errorf("CreateSlot of an existing slot = %v, want ErrSlotExists naming it and the fix", err)
	}

	insertEvents(t, conn, 3)
	info, err := InspectSlot(ctx, conn, slot)
	if err != nil {
		t.Fatal(err)
	}
	row := readSlot(t, conn, slot)
	if info.Type != "logical" || info.Plugin != Plugin || info.Active || info.ActivePID != 0 ||
		info.ConfirmedFlush != row.confirmedFlush || info.ConfirmedFlush != consistent || info.WALStatus != "reserved" {
		t.Errorf("InspectSlot = %+v, want an inactive logical pgoutput slot at the consistent point %s (pg_replication_slots: %s)", info, consistent, row)
	}
	if info.Database != info.ConnectedDatabase || info.Usable() != "" {
		t.Errorf("slot of database %q read from %q: Usable() = %q, want usable", info.Database, info.ConnectedDatabase, info.Usable())
	}
	// The rows committed since the slot was made are lag: WAL it still holds.
	if info.LagBytes <= 0 || info.RetainedBytes < info.LagBytes || uint64(info.CurrentWAL) != uint64(info.ConfirmedFlush)+uint64(info.LagBytes) {
		t.Errorf("lag %d, retained %d, current %s, confirmed %s: want lag = current - confirmed > 0 and retained >= lag",
			info.LagBytes, info.RetainedBytes, info.CurrentWAL, info.ConfirmedFlush)
	}

	pid := holdSlot(t, dsn, conn, slot)
	if info, err = InspectSlot(ctx, conn, slot); err != nil || !info.Active || info.ActivePID != pid || info.ActiveApplication != "outboxd" {
		t.Errorf("InspectSlot of a held slot = %+v, %v; want active by PID %d, application outboxd", info, err, pid)
	}
	_, err = DropSlot(ctx, conn, slot, DropOptions{})
	if !errors.Is(err, ErrSlotActive) || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), strconv.Itoa(int(pid))) {
		t.Errorf("DropSlot of an active slot = %v, want ErrSlotActive naming PID %d and --force", err, pid)
	}
	if !readSlot(t, conn, slot).active {
		t.Fatal("the refused drop let go of the slot")
	}
	before, err := DropSlot(ctx, conn, slot, DropOptions{Force: true})
	if err != nil {
		t.Fatalf("DropSlot --force: %v", err)
	}
	if before.ActivePID != pid {
		t.Errorf("DropSlot reported the slot as held by %d, want %d", before.ActivePID, pid)
	}
	if _, err := InspectSlot(ctx, conn, slot); !errors.Is(err, ErrSlotNotFound) {
		t.Errorf("after DropSlot the slot is still there: %v", err)
	}
	var terminated bool
	if err := conn.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&terminated); err != nil || !terminated {
		t.Errorf("walsender %d still runs after DropSlot --force (%v)", pid, err)
	}
	if _, err := DropSlot(ctx, conn, slot, DropOptions{}); !errors.Is(err, ErrSlotNotFound) || !strings.Contains(err.Error(), "nothing to drop") {
		t.Errorf("DropSlot of a missing slot = %v, want ErrSlotNotFound saying there is nothing to drop", err)
	}
}

// TestDropSlotOfAnotherTool: a slot of another output plugin, or a
// physical one, is not outboxd's to drop.
func TestDropSlotOfAnotherTool(t *testing.T) {
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	ctx := context.Background()
	for _, create := range []string{
		"SELECT pg_create_logical_replication_slot($1, 'test_decoding')",
		"SELECT pg_create_physical_replication_slot($1)",
	} {
		slot := uniqueSlot()
		if _, err := conn.Exec(ctx, create, slot); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", slot) }) //nolint:errcheck
		info, err := DropSlot(ctx, conn, slot, DropOptions{Force: true})
		if err == nil || !strings.Contains(err.Error(), "not outboxd's kind") || !strings.Contains(err.Error(), "pg_drop_replication_slot('"+slot+"')") {
			t.Errorf("DropSlot of %s = %v, want a refusal naming the SQL to drop it", create, err)
		}
		if info.Usable() == "" {
			t.Errorf("%s: Usable() is empty for %+v", create, info)
		}
		if _, err := InspectSlot(ctx, conn, slot); err != nil {
			t.Errorf("the refused slot is gone: %v", err)
		}
	}
}

func TestInspectPublication(t *testing.T) {
	_, conn := pgtest.Shared(t).MigratedDatabase(t)
	ctx := context.Background()
	table := Table{Schema: "public", Name: "outbox"}
	pub, err := InspectPublication(ctx, conn, "outboxd", table)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Inserts || pub.AllTables || len(pub.Tables) != 1 || pub.Tables[0] != `"public"."outbox"` || !pub.Holds(table) {
		t.Errorf("InspectPublication = %+v, want the migrated publication of public.outbox", pub)
	}
	if pub.Holds(Table{Schema: "public", Name: "other"}) {
		t.Error("Holds(public.other) is true")
	}
	_, err = InspectPublication(ctx, conn, "missing", table)
	if !errors.Is(err, ErrPublicationNotFound) || !strings.Contains(err.Error(), `CREATE PUBLICATION "missing" FOR TABLE "public"."outbox"`) {
		t.Errorf("InspectPublication of a missing one = %v, want ErrPublicationNotFound with the SQL that creates it", err)
	}
}

// TestInvalidatedSlotCause: an invalidated slot says why, from
// invalidation_reason where the server has it (PostgreSQL 17+).
func TestInvalidatedSlotCause(t *testing.T) {
	for _, tt := range []struct{ reason, want string }{
		{"", "the WAL it needed was removed (it retained more than max_slot_wal_keep_size)"},
		{"wal_removed", "max_slot_wal_keep_size"},
		{"idle_timeout", "inactive longer than idle_replication_slot_timeout"},
		{"rows_removed", "hot_standby_feedback"},
		{"wal_level_insufficient", "wal_level was lowered"},
		{"something_new", "invalidation_reason something_new"},
	} {
		s := SlotInfo{Type: "logical", Plugin: Plugin, WALStatus: "lost", InvalidationReason: tt.reason}
		if got := s.Usable(); !strings.HasPrefix(got, "is invalidated (wal_status = lost): ") || !strings.Contains(got, tt.want) {
			t.Errorf("reason %q: Usable() = %q, want it to say %q", tt.reason, got, tt.want)
		}
	}
}
