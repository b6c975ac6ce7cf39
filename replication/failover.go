package replication

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// FailoverSlotsMajor is the first PostgreSQL major with failover slots: a
// logical slot created with FAILOVER true is synchronised to standbys that
// have sync_replication_slots on, and survives a promotion.
const FailoverSlotsMajor = 17

// slotOptions is CREATE_REPLICATION_SLOT's tail after the plugin name:
// what to do with the snapshot ("nothing" or "export") and, on PostgreSQL
// 17+ when Config.Failover asks, FAILOVER true. PostgreSQL 15 introduced
// the option list; older servers know only the bare keywords.
func slotOptions(major int, snapshot string, failover bool) string {
	if major < 15 {
		if snapshot == "export" {
			return "EXPORT_SNAPSHOT"
		}
		return "NOEXPORT_SNAPSHOT"
	}
	opts := fmt.Sprintf("(SNAPSHOT '%s'", snapshot)
	if failover && major >= FailoverSlotsMajor {
		opts += ", FAILOVER true"
	}
	return opts + ")"
}

// MakeFailoverSlot makes the existing slot a failover slot (PostgreSQL
// 17+): one created by an older outboxd, by hand or with failover off.
// The slot must be inactive, as it is before Start.
func (s *Stream) MakeFailoverSlot(ctx context.Context) error {
	sql := fmt.Sprintf("ALTER_REPLICATION_SLOT %s (FAILOVER true)", s.cfg.Slot)
	if _, err := s.conn.Exec(ctx, sql).ReadAll(); err != nil {
		return classify(fmt.Sprintf("make replication slot %q a failover slot", s.cfg.Slot), err)
	}
	return nil
}

// TimelineSwitch is one line of a timeline history: timeline Timeline
// ended, and the next began, at LSN End.
type TimelineSwitch struct {
	Timeline int32
	End      pglogrepl.LSN
}

// TimelineHistory is the history of the server's current timeline: every
// earlier timeline it descends from and where each ended. Timeline 1 has
// none.
func (s *Stream) TimelineHistory(ctx context.Context) ([]TimelineSwitch, error) {
	if s.system.Timeline <= 1 {
		return nil, nil
	}
	res, err := pglogrepl.TimelineHistory(ctx, s.conn, s.system.Timeline)
	if err != nil {
		return nil, fmt.Errorf("read the history of timeline %d: %w", s.system.Timeline, err)
	}
	return ParseTimelineHistory(res.Content)
}

// ParseTimelineHistory reads a timeline history file: one line per
// ancestor, "timeline<TAB>end LSN<TAB>reason"; blank lines and # comments
// are skipped.
func ParseTimelineHistory(content []byte) ([]TimelineSwitch, error) {
	var history []TimelineSwitch
	lines := bufio.NewScanner(bytes.NewReader(content))
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return nil, fmt.Errorf("timeline history line %d %q: want a timeline and an LSN", n, line)
		}
		tli, err := strconv.ParseInt(fields[0], 10, 32)
		if err != nil || tli < 1 {
			return nil, fmt.Errorf("timeline history line %d: timeline %q is not a positive number", n, fields[0])
		}
		end, err := pglogrepl.ParseLSN(fields[1])
		if err != nil {
			return nil, fmt.Errorf("timeline history line %d: %w", n, err)
		}
		history = append(history, TimelineSwitch{Timeline: int32(tli), End: end})
	}
	return history, lines.Err()
}

// FailoverSetup is what the primary says of a failover slot's protection:
// read on a normal connection by InspectFailover.
type FailoverSetup struct {
	// Major is the server's major version; the rest is empty below
	// FailoverSlotsMajor.
	Major int
	// SlotFailover is pg_replication_slots.failover of the slot.
	SlotFailover bool
	// StandbySlots is synchronized_standby_slots: the physical slots of the
	// standbys that must have received WAL before logical slots get it.
	StandbySlots []string
	// Standbys are those physical slots as the primary has them.
	Standbys []StandbySlot
	// PhysicalSlots counts the server's physical slots: a standby that can
	// keep a copy of the logical slot streams from one (primary_slot_name).
	PhysicalSlots int
}

// StandbySlot is a physical slot named in synchronized_standby_slots.
type StandbySlot struct {
	Name   string
	Exists bool
	Active bool
	// Feedback is true when the slot has an xmin or catalog_xmin: the
	// standby sends hot standby feedback (hot_standby_feedback = on), which
	// keeps the catalog rows its synchronised logical slots need.
	Feedback bool
}

// InspectFailover reads the failover set-up of slot on the primary.
func InspectFailover(ctx context.Context, conn *pgx.Conn, slot string) (FailoverSetup, error) {
	var f FailoverSetup
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&f.Major); err != nil {
		return f, fmt.Errorf("read the server version: %w", err)
	}
	if f.Major < FailoverSlotsMajor {
		return f, nil
	}
	var standbySlots string
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT failover FROM pg_replication_slots WHERE slot_name = $1), false),
		current_setting('synchronized_standby_slots'),
		(SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'physical')`, slot).
		Scan(&f.SlotFailover, &standbySlots, &f.PhysicalSlots)
	if err != nil {
		return f, fmt.Errorf("read the failover set-up of replication slot %q: %w", slot, err)
	}
	for _, name := range strings.Split(standbySlots, ",") {
		if name = strings.TrimSpace(name); name != "" {
			f.StandbySlots = append(f.StandbySlots, name)
		}
	}
	for _, name := range f.StandbySlots {
		sb := StandbySlot{Name: name}
		err := conn.QueryRow(ctx, `SELECT active, xmin IS NOT NULL OR catalog_xmin IS NOT NULL FROM pg_replication_slots
			WHERE slot_name = $1 AND slot_type = 'physical'`, name).Scan(&sb.Active, &sb.Feedback)
		switch {
		case err == nil:
			sb.Exists = true
		case err != pgx.ErrNoRows:
			return f, fmt.Errorf("read physical replication slot %q: %w", name, err)
		}
		f.Standbys = append(f.Standbys, sb)
	}
	return f, nil
}

// Problems says what in the set-up can lose events at a failover, each
// with the settings that fix it; none when it is sound, when failover
// slots are not asked for (want) or not available, or when no standby
// streams from a physical slot (none could take the slot over).
func (f FailoverSetup) Problems(slot string, want bool) []string {
	if !want || f.Major < FailoverSlotsMajor || (f.PhysicalSlots == 0 && len(f.StandbySlots) == 0) {
		return nil
	}
	var problems []string
	if !f.SlotFailover {
		problems = append(problems, fmt.Sprintf("replication slot %q is not a failover slot, so no standby has it after a failover; "+
			"fix: outboxd makes it one when it starts with --slot-failover (the default) and the slot is free", slot))
	}
	if len(f.StandbySlots) == 0 {
		problems = append(problems, "synchronized_standby_slots is empty, so the logical slot can confirm WAL a standby has "+
			"not received, and a failover to that standby loses those events; fix on the primary: "+
			"ALTER SYSTEM SET synchronized_standby_slots = 'STANDBY_SLOT'; SELECT pg_reload_conf(); "+
			"naming each standby's physical slot (its primary_slot_name); on each standby: sync_replication_slots = on, "+
			"hot_standby_feedback = on, primary_slot_name = 'STANDBY_SLOT' and dbname in primary_conninfo")
	}
	for _, sb := range f.Standbys {
		switch {
		case !sb.Exists:
			problems = append(problems, fmt.Sprintf("synchronized_standby_slots names %q, which is not a physical slot here: "+
				"logical replication waits for it, so outboxd stalls; fix: SELECT pg_create_physical_replication_slot('%s') "+
				"and set primary_slot_name = '%s' on the standby, or remove it from synchronized_standby_slots", sb.Name, sb.Name, sb.Name))
		case !sb.Active:
			problems = append(problems, fmt.Sprintf("the standby of physical slot %q is not connected: outboxd waits for it "+
				"(synchronized_standby_slots) and publishes nothing until it is back; fix: start the standby, or remove "+
				"%q from synchronized_standby_slots to go on without it (it then cannot take over without loss)", sb.Name, sb.Name))
		case !sb.Feedback:
			problems = append(problems, fmt.Sprintf("the standby of physical slot %q sends no hot standby feedback, so the "+
				"primary may remove rows its synchronised copy of the slot needs, and the copy is invalidated; "+
				"fix on the standby: hot_standby_feedback = on", sb.Name))
		}
	}
	return problems
}

// StandbySetup is what a standby says of its part in a failover: read on
// a normal connection to it by InspectStandby.
type StandbySetup struct {
	// InRecovery is false on a primary; the rest is then not read.
	InRecovery bool
	// SyncSlots is sync_replication_slots ("" before PostgreSQL 17).
	SyncSlots string
	// Feedback is hot_standby_feedback.
	Feedback string
	// PrimarySlot is primary_slot_name: its physical slot on the primary.
	PrimarySlot string
	// Synced is true when the standby holds a synchronised copy of the
	// logical slot that a promotion would keep (synced, not temporary).
	Synced bool
}

// InspectStandby reads a standby's failover settings and its copy of slot.
func InspectStandby(ctx context.Context, conn *pgx.Conn, slot string) (StandbySetup, error) {
	var s StandbySetup
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&s.InRecovery); err != nil || !s.InRecovery {
		return s, err
	}
	err := conn.QueryRow(ctx, `SELECT coalesce(current_setting('sync_replication_slots', true), ''),
		current_setting('hot_standby_feedback'), current_setting('primary_slot_name'),
		coalesce((SELECT (to_jsonb(s) ->> 'synced')::bool AND NOT s.temporary FROM pg_replication_slots s WHERE s.slot_name = $1), false)`,
		slot).Scan(&s.SyncSlots, &s.Feedback, &s.PrimarySlot, &s.Synced)
	if err != nil {
		return s, fmt.Errorf("read the standby's failover settings: %w", err)
	}
	return s, nil
}

// Problems says what keeps the standby named name from taking over the
// slot without loss, each with the fix; standbySlots is the primary's
// synchronized_standby_slots.
func (s StandbySetup) Problems(name string, standbySlots []string) []string {
	if !s.InRecovery {
		return nil
	}
	var problems []string
	if s.SyncSlots != "on" {
		problems = append(problems, fmt.Sprintf("standby %s has sync_replication_slots off, so it keeps no copy of the slot "+
			"and a failover to it loses the slot; fix on it: sync_replication_slots = on (and dbname in primary_conninfo)", name))
	}
	if s.Feedback != "on" {
		problems = append(problems, fmt.Sprintf("standby %s has hot_standby_feedback off, so its copy of the slot can be "+
			"invalidated; fix on it: hot_standby_feedback = on", name))
	}
	if s.PrimarySlot == "" || !slices.Contains(standbySlots, s.PrimarySlot) {
		problems = append(problems, fmt.Sprintf("standby %s streams from physical slot %q, which synchronized_standby_slots "+
			"on the primary does not name, so the logical slot can get ahead of it; fix: set primary_slot_name on the standby "+
			"and name that slot in the primary's synchronized_standby_slots", name, s.PrimarySlot))
	}
	return problems
}
