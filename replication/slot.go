package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrSlotNotFound is matched (errors.Is) by the errors InspectSlot and
// DropSlot return for a slot that does not exist.
var ErrSlotNotFound = errors.New("replication slot does not exist")

// ErrSlotExists is matched by the error CreateSlot returns when a slot of
// that name exists already.
var ErrSlotExists = errors.New("replication slot exists already")

// Plugin is the output plugin outboxd decodes.
const Plugin = "pgoutput"

// SlotInfo is a replication slot as pg_replication_slots shows it, with
// what it costs the server, read in one query.
type SlotInfo struct {
	Name     string
	Type     string // "logical" or "physical"
	Plugin   string // output plugin; empty for a physical slot
	Database string // empty for a physical slot
	Active   bool
	// ActivePID is the server process that holds the slot, 0 when none.
	ActivePID int32
	// ActiveApplication is that process's application_name ("" when none).
	ActiveApplication string
	// ConfirmedFlush is the position the consumer confirmed: nothing
	// before it is sent again.
	ConfirmedFlush pglogrepl.LSN
	// Restart is the oldest WAL position the slot may still need.
	Restart pglogrepl.LSN
	// WALStatus is reserved, extended, unreserved or lost.
	WALStatus string
	// InvalidationReason is why PostgreSQL 17+ invalidated the slot
	// (wal_removed, idle_timeout, rows_removed, wal_level_insufficient);
	// "" when it is valid, or on older servers.
	InvalidationReason string
	// InactiveSince is when the slot was last released (PostgreSQL 17+);
	// zero while active, or on older servers.
	InactiveSince time.Time
	// IdleTimeout is the server's idle_replication_slot_timeout
	// (PostgreSQL 18+): an inactive slot is invalidated at the first
	// checkpoint after that long. Zero when off or unknown.
	IdleTimeout time.Duration
	// CurrentWAL is pg_current_wal_lsn() when the slot was read.
	CurrentWAL pglogrepl.LSN
	// RetainedBytes is CurrentWAL minus Restart: WAL kept on disk for the slot.
	RetainedBytes int64
	// LagBytes is CurrentWAL minus ConfirmedFlush: WAL written since the
	// consumer's last confirmation.
	LagBytes int64
	// ConnectedDatabase is the database of the connection that read it.
	ConnectedDatabase string
}

// Usable returns why outboxd cannot stream from the slot, or "" when it
// can: it must be a logical pgoutput slot of the connected database whose
// WAL is not lost. Preflight refuses the same slots.
func (s SlotInfo) Usable() string {
	switch {
	case s.Type != "logical":
		return fmt.Sprintf("is a %s slot, not a logical one", s.Type)
	case s.Plugin != Plugin:
		return fmt.Sprintf("uses output plugin %q, outboxd needs %q", s.Plugin, Plugin)
	case s.Database != s.ConnectedDatabase:
		return fmt.Sprintf("belongs to database %q, not %q", s.Database, s.ConnectedDatabase)
	case s.WALStatus == "lost":
		return "is invalidated (wal_status = lost): " + invalidationCause(s.InvalidationReason)
	}
	return ""
}

// invalidationCause says why PostgreSQL invalidated a slot, from
// pg_replication_slots.invalidation_reason ("" before PostgreSQL 17, where
// WAL removal was the only cause of wal_status lost for a logical slot on
// a primary).
func invalidationCause(reason string) string {
	switch reason {
	case "", "wal_removed":
		return "the WAL it needed was removed (it retained more than max_slot_wal_keep_size)"
	case "idle_timeout":
		return "it was inactive longer than idle_replication_slot_timeout (invalidation_reason idle_timeout)"
	case "rows_removed":
		return "catalog rows it needed were removed (invalidation_reason rows_removed; on a standby: hot_standby_feedback off)"
	case "wal_level_insufficient":
		return "wal_level was lowered below logical on the primary (invalidation_reason wal_level_insufficient)"
	}
	return "invalidation_reason " + reason
}

// ValidSlotName reports, as an error naming the value and the rule, a name
// PostgreSQL would refuse for a replication slot.
func ValidSlotName(name string) error {
	if !slotName.MatchString(name) {
		return fmt.Errorf("slot name %q is invalid: use 1-63 lower-case letters, digits or underscores (e.g. outboxd)", name)
	}
	return nil
}

// InspectSlot reads the slot on a normal connection. A missing slot is an
// error matching ErrSlotNotFound that says how to create it.
func InspectSlot(ctx context.Context, conn *pgx.Conn, name string) (SlotInfo, error) {
	var (
		s                                  = SlotInfo{Name: name}
		confirmed, restart, current        *string
		plugin, database, walStatus, appNm *string
		reason                             *string
		inactiveSince                      *time.Time
		idleTimeout                        *float64
		pid                                *int32
		retained, lag                      *int64
	)
	// LSNs are read as text: pg_lsn has no binary form pgx knows. A
	// standby (logical decoding on a standby, PostgreSQL 16) has no
	// current WAL position of its own: its replay position stands in.
	// Columns and settings of newer servers are read so that older ones
	// answer NULL (to_jsonb of the row, current_setting's missing_ok).
	err := conn.QueryRow(ctx, `
		WITH now AS (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn)
		SELECT s.slot_type, s.plugin, s.database, s.active, s.active_pid, a.application_name,
		       s.confirmed_flush_lsn::text, s.restart_lsn::text, s.wal_status,
		       now.lsn::text, (now.lsn - s.restart_lsn)::bigint, (now.lsn - s.confirmed_flush_lsn)::bigint,
		       current_database(), to_jsonb(s) ->> 'invalidation_reason', (to_jsonb(s) ->> 'inactive_since')::timestamptz,
		       extract(epoch FROM nullif(current_setting('idle_replication_slot_timeout', true), '')::interval)::float8
		FROM pg_replication_slots s CROSS JOIN now LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid
		WHERE s.slot_name = $1`, name).
		Scan(&s.Type, &plugin, &database, &s.Active, &pid, &appNm, &confirmed, &restart, &walStatus,
			&current, &retained, &lag, &s.ConnectedDatabase, &reason, &inactiveSince, &idleTimeout)
	if errors.Is(err, pgx.ErrNoRows) {
		return SlotInfo{}, fmt.Errorf("replication slot %q: %w; fix: create it with `outboxd slot create --slot %s` (outboxd run also creates it), or check --slot and --pg-url",
			name, ErrSlotNotFound, name)
	}
	if err != nil {
		return SlotInfo{}, fmt.Errorf("read replication slot %q: %w", name, err)
	}
	s.Plugin, s.Database, s.WALStatus, s.ActiveApplication = deref(plugin), deref(database), deref(walStatus), deref(appNm)
	s.InvalidationReason = deref(reason)
	if inactiveSince != nil {
		s.InactiveSince = *inactiveSince
	}
	if idleTimeout != nil {
		s.IdleTimeout = time.Duration(*idleTimeout * float64(time.Second))
	}
	if pid != nil {
		s.ActivePID = *pid
	}
	for _, f := range []struct {
		text *string
		lsn  *pglogrepl.LSN
	}{{confirmed, &s.ConfirmedFlush}, {restart, &s.Restart}, {current, &s.CurrentWAL}} {
		if f.text == nil {
			continue
		}
		if *f.lsn, err = pglogrepl.ParseLSN(*f.text); err != nil {
			return SlotInfo{}, fmt.Errorf("read replication slot %q: %w", name, err)
		}
	}
	if retained != nil {
		s.RetainedBytes = max(*retained, 0)
	}
	if lag != nil {
		s.LagBytes = max(*lag, 0)
	}
	return s, nil
}

// CreateSlot creates the logical pgoutput slot cfg.Slot the way outboxd run
// does when it is missing, and returns its consistent point: streaming from
// the new slot sees every transaction that commits after it. A slot of that
// name that exists already is an error matching ErrSlotExists that says what
// it is and what to do.
func CreateSlot(ctx context.Context, cfg Config) (pglogrepl.LSN, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	conn, err := pgx.Connect(ctx, cfg.ConnString)
	if err != nil {
		return 0, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	existing, err := InspectSlot(ctx, conn, cfg.Slot)
	conn.Close(context.WithoutCancel(ctx))
	switch {
	case err == nil:
		return 0, existsError(existing)
	case !errors.Is(err, ErrSlotNotFound):
		return 0, err
	}
	stream, err := Connect(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer stream.conn.Close(context.WithoutCancel(ctx))
	lsn, err := stream.CreateSlot(ctx)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42710" { // duplicate_object: created meanwhile
		return 0, fmt.Errorf("replication slot %q: %w; fix: see it with `outboxd slot info --slot %s`, or choose another --slot",
			cfg.Slot, ErrSlotExists, cfg.Slot)
	}
	return lsn, err
}

// existsError says what the slot in the way is and what to do about it.
func existsError(s SlotInfo) error {
	if problem := s.Usable(); problem != "" {
		return fmt.Errorf("replication slot %q: %w and %s; fix: choose another --slot, or drop it if nothing else reads it",
			s.Name, ErrSlotExists, problem)
	}
	return fmt.Errorf("replication slot %q: %w (plugin %s, confirmed_flush_lsn %s): outboxd run uses it as it is; fix: nothing to do, or to start over from now drop it first with `outboxd slot drop --slot %s --yes` (events not yet published are lost)",
		s.Name, ErrSlotExists, s.Plugin, s.ConfirmedFlush, s.Name)
}

// DropOptions are how DropSlot treats a slot in use.
type DropOptions struct {
	// Force terminates the server process holding an active slot (an
	// outboxd streaming from it) and drops the slot once it is free.
	// Without it an active slot is an error matching ErrSlotActive.
	Force bool
	// Wait is how long Force keeps terminating holders that come back (a
	// hot standby takes the slot over at once). Default 10s.
	Wait time.Duration
}

// DropSlot drops the logical slot name on a normal connection to its
// database, and returns the slot as it was just before. Only a pgoutput
// slot is dropped: a slot of another plugin or kind belongs to another
// tool. Every refusal names the slot and the fix.
func DropSlot(ctx context.Context, conn *pgx.Conn, name string, opts DropOptions) (SlotInfo, error) {
	if opts.Wait == 0 {
		opts.Wait = 10 * time.Second
	}
	info, err := InspectSlot(ctx, conn, name)
	if errors.Is(err, ErrSlotNotFound) {
		return SlotInfo{}, NothingToDrop(name)
	}
	if err != nil {
		return SlotInfo{}, err
	}
	if err := info.Droppable(opts.Force); err != nil {
		return info, err
	}
	return info, dropFreed(ctx, conn, name, opts.Wait)
}

// NothingToDrop is the error for dropping a slot that does not exist; it
// matches ErrSlotNotFound.
func NothingToDrop(name string) error {
	return fmt.Errorf("replication slot %q: %w, so there is nothing to drop; fix: check --slot and --pg-url (SELECT slot_name FROM pg_replication_slots lists the slots)", name, ErrSlotNotFound)
}

// Droppable says why DropSlot would refuse the slot: it is not a logical
// pgoutput slot (another tool reads it), it belongs to another database
// (PostgreSQL drops a logical slot only from its own), or it is active and
// force is not set. Nil when it may be dropped.
func (s SlotInfo) Droppable(force bool) error {
	if s.Type != "logical" || s.Plugin != Plugin {
		return fmt.Errorf("replication slot %q is a %s slot of plugin %q, not outboxd's kind (logical, %s): another tool probably reads it; outboxd does not drop it, drop it with SELECT pg_drop_replication_slot('%s') if you are sure",
			s.Name, s.Type, s.Plugin, Plugin, s.Name)
	}
	if s.Database != s.ConnectedDatabase {
		return fmt.Errorf("replication slot %q belongs to database %q, and PostgreSQL drops a logical slot only from its own database; fix: point --pg-url at database %q",
			s.Name, s.Database, s.Database)
	}
	if s.Active && !force {
		return fmt.Errorf("replication slot %q: %w (server process %d%s); fix: stop that outboxd first, or pass --force to terminate it",
			s.Name, ErrSlotActive, s.ActivePID, applicationSuffix(s.ActiveApplication))
	}
	return nil
}

func applicationSuffix(app string) string {
	if app == "" {
		return ""
	}
	return fmt.Sprintf(", application_name %q", app)
}

// dropFreed drops the slot, terminating whichever process holds it: a hot
// standby can take the slot between the termination and the drop, so it
// tries until wait has passed.
func dropFreed(ctx context.Context, conn *pgx.Conn, name string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
			WHERE slot_name = $1 AND active_pid IS NOT NULL`, name); err != nil {
			return fmt.Errorf("terminate the process holding replication slot %q: %w", name, err)
		}
		_, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", name)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("drop replication slot %q: %w", name, err)
			}
			return nil
		}
		// The terminated process lets go of the slot as it exits.
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop replication slot %q: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PublicationInfo is a publication and the tables it holds.
type PublicationInfo struct {
	Name string
	// Inserts reports whether it publishes INSERTs (outboxd needs them).
	Inserts bool
	// AllTables is FOR ALL TABLES.
	AllTables bool
	// Tables are schema-qualified, quoted as SQL needs them.
	Tables []string
}

// ErrPublicationNotFound is matched by the error InspectPublication
// returns for a publication that does not exist.
var ErrPublicationNotFound = errors.New("publication does not exist")

// InspectPublication reads the publication and its tables. A missing one
// is an error matching ErrPublicationNotFound that says how to create it
// for table.
func InspectPublication(ctx context.Context, conn *pgx.Conn, name string, table Table) (PublicationInfo, error) {
	p := PublicationInfo{Name: name}
	err := conn.QueryRow(ctx, "SELECT pubinsert, puballtables FROM pg_publication WHERE pubname = $1", name).
		Scan(&p.Inserts, &p.AllTables)
	if errors.Is(err, pgx.ErrNoRows) {
		return PublicationInfo{}, fmt.Errorf("publication %q: %w; fix: run `outboxd migrate`, or CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert')",
			name, ErrPublicationNotFound, pgx.Identifier{name}.Sanitize(), table)
	}
	if err != nil {
		return PublicationInfo{}, fmt.Errorf("read publication %q: %w", name, err)
	}
	rows, err := conn.Query(ctx, `SELECT schemaname, tablename FROM pg_publication_tables
		WHERE pubname = $1 ORDER BY schemaname, tablename`, name)
	if err != nil {
		return PublicationInfo{}, fmt.Errorf("read tables of publication %q: %w", name, err)
	}
	tables, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var t Table
		err := row.Scan(&t.Schema, &t.Name)
		return t.String(), err
	})
	if err != nil {
		return PublicationInfo{}, fmt.Errorf("read tables of publication %q: %w", name, err)
	}
	p.Tables = tables
	return p, nil
}

// Holds reports whether the publication publishes table's inserts.
func (p PublicationInfo) Holds(table Table) bool {
	return p.Inserts && contains(p.Tables, table.String())
}
