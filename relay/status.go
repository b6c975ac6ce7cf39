package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// StatusReport is what `outboxd status --json` prints. Its JSON field
// names are an interface for scripts: add fields, never rename them.
type StatusReport struct {
	Server      ServerReport      `json:"server"`
	Slot        SlotReport        `json:"slot"`
	Publication PublicationReport `json:"publication"`
	Stream      StreamReport      `json:"stream"`
	Checkpoint  CheckpointReport  `json:"checkpoint"`
	// Warnings is never null: an empty list means nothing needs attention.
	Warnings []StatusWarning `json:"warnings"`
	// BlocksRun is true when a warning blocks outboxd run (BlocksRun of
	// StatusWarning): `outboxd status` then exits non-zero.
	BlocksRun bool `json:"blocks_run"`

	// failover is the primary's failover set-up (PostgreSQL 17+), or why
	// it could not be read.
	failover    replication.FailoverSetup
	failoverErr error
	// standbyProblems are the standbys' (the other hosts of --pg-url).
	standbyProblems []string
}

// presence says whether a section's object exists (for the server: that
// it answered); Problem says why it is missing or could not be read, with
// the fix. A section's other fields are meaningful only when Exists is true.
type presence struct {
	Exists  bool   `json:"exists"`
	Problem string `json:"problem"`
	// unreadable: the server did not answer, so whether it exists is unknown.
	unreadable bool
}

// fail records err; it is unreadable unless it matches missing.
func (p *presence) fail(err, missing error) {
	p.Exists, p.Problem, p.unreadable = false, err.Error(), !errors.Is(err, missing)
}

// warning is the warning for a section that is missing or unreadable. An
// object that cannot be read blocks outboxd run, which would not get
// further; a missing one blocks it when missingBlocks.
func (p presence) warning(what string, missingBlocks bool) []StatusWarning {
	switch {
	case p.Exists:
		return nil
	case p.unreadable:
		return []StatusWarning{{Code: what + "_unreadable", Message: p.Problem, BlocksRun: true}}
	}
	return []StatusWarning{{Code: what + "_missing", Message: p.Problem, BlocksRun: missingBlocks}}
}

// ServerReport is the PostgreSQL server --pg-url names, as outboxd run
// holds it to its needs and to the checkpoint.
type ServerReport struct {
	presence
	WALLevel string `json:"wal_level"`
	// SystemID is pg_control_system()'s system_identifier, the cluster's
	// identity that a checkpoint records.
	SystemID string `json:"system_id"`
	// Timeline is the server's current timeline; 0 on a standby, where it
	// is not read.
	Timeline int32 `json:"timeline"`
	// WALFlushLSN is where the server's flushed WAL ends (on a standby:
	// its replay position), read after the slot and the checkpoint: what
	// outboxd run holds them to (IDENTIFY_SYSTEM's xlogpos).
	WALFlushLSN string `json:"wal_flush_lsn"`

	walEnd pglogrepl.LSN
}

type SlotReport struct {
	Name string `json:"name"`
	presence
	Type              string `json:"type"`
	Plugin            string `json:"plugin"`
	Database          string `json:"database"`
	Active            bool   `json:"active"`
	ActivePID         int32  `json:"active_pid"`
	ActiveApplication string `json:"active_application"`
	ConfirmedFlushLSN string `json:"confirmed_flush_lsn"`
	RestartLSN        string `json:"restart_lsn"`
	WALStatus         string `json:"wal_status"`
	CurrentWALLSN     string `json:"current_wal_lsn"`
	RetainedWALBytes  int64  `json:"retained_wal_bytes"`
	LagBytes          int64  `json:"lag_bytes"`

	info replication.SlotInfo
}

type PublicationReport struct {
	Name string `json:"name"`
	presence
	PublishesInsert bool     `json:"publishes_insert"`
	AllTables       bool     `json:"all_tables"`
	Tables          []string `json:"tables"`
	// Table is --table; HoldsTable says whether the publication has it.
	Table      string `json:"table"`
	HoldsTable bool   `json:"holds_table"`
}

type StreamReport struct {
	Name string `json:"name"`
	presence
	Subjects               []string `json:"subjects"`
	Messages               uint64   `json:"messages"`
	Bytes                  uint64   `json:"bytes"`
	Replicas               int      `json:"replicas"`
	Storage                string   `json:"storage"`
	DuplicateWindow        string   `json:"duplicate_window"`
	DuplicateWindowSeconds float64  `json:"duplicate_window_seconds"`
}

type CheckpointReport struct {
	Store string `json:"store"`
	presence
	LSN      string `json:"lsn"`
	SavedAt  string `json:"saved_at"` // RFC 3339, UTC
	Slot     string `json:"slot"`
	SystemID string `json:"system_id"`
	Timeline int32  `json:"timeline"`

	lsn   pglogrepl.LSN
	saved checkpoint.Checkpoint
	store checkpoint.Store
}

// StatusWarning is one thing that needs attention. Code is stable (see the
// list in docs/operations.md); Message says what and what to do.
type StatusWarning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// BlocksRun says that outboxd run with these settings cannot relay
	// until it is fixed: it refuses to start, or retries without end (a
	// server that does not answer).
	BlocksRun bool `json:"blocks_run"`
}

// StatusOptions are what Status reads besides the relay's Config.
type StatusOptions struct {
	// RetainedMiB is how much WAL an inactive slot may retain before a
	// warning.
	RetainedMiB int64
	// ConnectNATS connects to NATS once, without reconnecting.
	ConnectNATS func() (*nats.Conn, error)
}

// Status reads, without changing anything, what a relay with cfg would
// use: every section it can; a section that fails is reported with its
// problem, never stops the others.
func Status(ctx context.Context, cfg Config, opts StatusOptions) StatusReport {
	r := StatusReport{
		Slot:        SlotReport{Name: cfg.Slot},
		Publication: PublicationReport{Name: cfg.Publication, Table: cfg.Table.String(), Tables: []string{}},
		Stream:      StreamReport{Name: cfg.Stream, Subjects: []string{}},
		Checkpoint:  CheckpointReport{Store: cfg.Checkpoint.String()},
		Warnings:    []StatusWarning{},
	}
	conn, err := ConnectPostgres(ctx, cfg.PGURL)
	if err != nil {
		err = fmt.Errorf("cannot read: %w", err)
		r.Server.fail(err, nil)
		r.Slot.fail(err, nil)
		r.Publication.fail(err, nil)
	} else {
		defer conn.Close(context.WithoutCancel(ctx))
		gatherPostgres(ctx, conn, cfg, &r)
	}
	gatherNATS(ctx, cfg, opts.ConnectNATS, &r)
	if conn != nil && r.Server.Exists {
		// Last: a relay streaming meanwhile saves and confirms only WAL the
		// server had flushed before this read.
		readWALEnd(ctx, conn, &r)
	}
	r.Warnings = append(r.Warnings, derivedWarnings(r, cfg, opts.RetainedMiB<<20)...)
	for _, w := range r.Warnings {
		r.BlocksRun = r.BlocksRun || w.BlocksRun
	}
	return r
}

func gatherPostgres(ctx context.Context, conn *pgx.Conn, cfg Config, r *StatusReport) {
	readServer(ctx, conn, r)
	if info, err := replication.InspectSlot(ctx, conn, cfg.Slot); err != nil {
		r.Slot.fail(err, replication.ErrSlotNotFound)
	} else {
		r.Slot = NewSlotReport(info)
	}
	pub, err := replication.InspectPublication(ctx, conn, cfg.Publication, cfg.Table)
	if err != nil {
		r.Publication.fail(err, replication.ErrPublicationNotFound)
		return
	}
	r.Publication.Exists, r.Publication.PublishesInsert, r.Publication.AllTables = true, pub.Inserts, pub.AllTables
	r.Publication.Tables, r.Publication.HoldsTable = pub.Tables, pub.Holds(cfg.Table) || (pub.AllTables && pub.Inserts)
	// Only a primary's synchronized_standby_slots matter.
	if r.Server.Exists && r.Server.Timeline != 0 {
		r.failover, r.failoverErr = replication.InspectFailover(ctx, conn, cfg.Slot)
		if r.failoverErr == nil && cfg.SlotFailover && r.failover.Major >= replication.FailoverSlotsMajor {
			r.standbyProblems = standbyProblems(ctx, cfg, r.failover.StandbySlots)
		}
	}
}

// readServer reads wal_level and the identity a checkpoint records. On a
// primary the current timeline is the one in the name of the WAL file
// being written (pg_control_checkpoint()'s lags behind a promotion until
// the next checkpoint); a standby has no such file.
func readServer(ctx context.Context, conn *pgx.Conn, r *StatusReport) {
	err := conn.QueryRow(ctx, `
		SELECT current_setting('wal_level'), (SELECT system_identifier::text FROM pg_control_system()),
		       CASE WHEN pg_is_in_recovery() THEN 0
		            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_flush_lsn()), 1, 8))::bit(32)::int END`).
		Scan(&r.Server.WALLevel, &r.Server.SystemID, &r.Server.Timeline)
	if err != nil {
		r.Server.fail(fmt.Errorf("cannot read: read wal_level and system identifier: %w", err), nil)
		return
	}
	r.Server.Exists = true
}

// readWALEnd reads where the server's WAL ends, as IDENTIFY_SYSTEM's
// xlogpos does: flushed WAL on a primary, replayed WAL on a standby (all a
// logical walsender there sends).
func readWALEnd(ctx context.Context, conn *pgx.Conn, r *StatusReport) {
	var end string
	err := conn.QueryRow(ctx, `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_flush_lsn() END)::text`).Scan(&end)
	if err == nil {
		r.Server.walEnd, err = pglogrepl.ParseLSN(end)
	}
	if err != nil {
		r.Server.fail(fmt.Errorf("cannot read: read the end of the server's WAL: %w", err), nil)
		return
	}
	r.Server.WALFlushLSN = end
}

// ReadWALLevel reads the server's wal_level.
func ReadWALLevel(ctx context.Context, conn *pgx.Conn) (string, error) {
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return "", fmt.Errorf("read wal_level: %w", err)
	}
	return level, nil
}

// WALLevelProblem says what a wal_level other than logical means for
// outboxd run, with the fix (as run's preflight does); "" for logical.
func WALLevelProblem(level string) string {
	if level == "logical" {
		return ""
	}
	return fmt.Sprintf("server setting wal_level is %q, logical replication needs \"logical\": outboxd run refuses to start "+
		"and no replication slot can be created; fix: ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL", level)
}

func NewSlotReport(s replication.SlotInfo) SlotReport {
	return SlotReport{
		Name: s.Name, presence: presence{Exists: true}, Type: s.Type, Plugin: s.Plugin, Database: s.Database,
		Active: s.Active, ActivePID: s.ActivePID, ActiveApplication: s.ActiveApplication,
		ConfirmedFlushLSN: s.ConfirmedFlush.String(), RestartLSN: s.Restart.String(), WALStatus: s.WALStatus,
		CurrentWALLSN: s.CurrentWAL.String(), RetainedWALBytes: s.RetainedBytes, LagBytes: s.LagBytes,
		info: s,
	}
}

// gatherNATS reads the stream and, for a kv: store, the checkpoint; a
// file: checkpoint is read without NATS.
func gatherNATS(ctx context.Context, cfg Config, connect func() (*nats.Conn, error), r *StatusReport) {
	if cfg.Checkpoint.Kind == checkpoint.KindFile {
		readCheckpoint(ctx, checkpoint.NewFileStore(cfg.Checkpoint.Path), r)
	}
	nc, err := connect()
	if err == nil {
		defer nc.Close()
	}
	var js jetstream.JetStream
	if err == nil {
		js, err = jetstream.New(nc)
	}
	if err != nil {
		err = fmt.Errorf("cannot read: %w", err)
		r.Stream.fail(err, nil)
		if cfg.Checkpoint.Kind == checkpoint.KindKV {
			r.Checkpoint.fail(err, nil)
		}
		return
	}
	gatherStream(ctx, cfg, js, r)
	if cfg.Checkpoint.Kind == checkpoint.KindKV {
		store, err := checkpoint.OpenKVStore(ctx, js, cfg.Checkpoint.Bucket, cfg.Slot)
		if err != nil {
			noCheckpoint(err, r)
			return
		}
		readCheckpoint(ctx, store, r)
	}
}

func gatherStream(ctx context.Context, cfg Config, js jetstream.JetStream, r *StatusReport) {
	info, err := sink.InspectStream(ctx, js, cfg.Stream, cfg.Subject)
	if err != nil {
		r.Stream.fail(err, jetstream.ErrStreamNotFound)
		if cfg.CreateStream && !r.Stream.unreadable {
			r.Stream.Problem = fmt.Sprintf("stream %q does not exist: outboxd run creates it (--create-stream)", cfg.Stream)
		}
		return
	}
	r.Stream = StreamReport{
		Name: info.Name, presence: presence{Exists: true}, Subjects: info.Subjects, Messages: info.Messages, Bytes: info.Bytes,
		Replicas: info.Replicas, Storage: info.Storage,
		DuplicateWindow: info.DuplicateWindow.String(), DuplicateWindowSeconds: info.DuplicateWindow.Seconds(),
	}
	for _, w := range info.Warnings {
		r.Warnings = append(r.Warnings, StatusWarning{Code: "stream_settings", Message: w})
	}
	durability, err := sink.CheckDurability(ctx, js, cfg.Stream, cfg.NATSMonitorURL)
	if err != nil {
		r.Warnings = append(r.Warnings, StatusWarning{Code: "stream_durability_unknown",
			Message: fmt.Sprintf("cannot check whether stream %q survives a power failure: %v", cfg.Stream, err)})
	}
	for _, w := range durability {
		r.Warnings = append(r.Warnings, StatusWarning{Code: "stream_single_replica", Message: w})
	}
}

func readCheckpoint(ctx context.Context, store checkpoint.Store, r *StatusReport) {
	r.Checkpoint.Store = store.String()
	cp, err := store.Load(ctx)
	if err != nil {
		noCheckpoint(err, r)
		return
	}
	r.Checkpoint = CheckpointReport{
		Store: store.String(), presence: presence{Exists: true}, LSN: cp.LSN.String(), SavedAt: cp.SavedAt.UTC().Format(time.RFC3339),
		Slot: cp.Slot, SystemID: cp.SystemID, Timeline: cp.Timeline, lsn: cp.LSN, saved: cp, store: store,
	}
}

// noCheckpoint records why there is no checkpoint to show: none saved yet
// is normal (not a warning) before outboxd first ran.
func noCheckpoint(err error, r *StatusReport) {
	if errors.Is(err, checkpoint.ErrNotFound) {
		r.Checkpoint.Problem = "none saved yet: outboxd run starts from the slot's confirmed_flush_lsn"
		return
	}
	r.Checkpoint.fail(fmt.Errorf("cannot read: %w", err), nil)
}

// derivedWarnings are the warnings that follow from the sections read:
// the server's settings, missing or unusable objects, an idle slot holding
// WAL, and a checkpoint that outboxd run would refuse. Each one that
// blocks run says so as run would (see resume.go and
// replication.Preflight).
func derivedWarnings(r StatusReport, cfg Config, retainedLimit int64) []StatusWarning {
	var out []StatusWarning
	add := func(code string, blocks bool, format string, args ...any) {
		out = append(out, StatusWarning{Code: code, Message: fmt.Sprintf(format, args...), BlocksRun: blocks})
	}
	if problem := WALLevelProblem(r.Server.WALLevel); r.Server.Exists && problem != "" {
		add("wal_level_not_logical", true, "%s", problem)
	}
	if r.Server.unreadable && !r.Slot.unreadable {
		// The server answered, but not these questions.
		out = append(out, r.Server.warning("server", true)...)
	}
	// Run holds the checkpoint to the server's identity first: one of
	// another cluster, timeline or slot says nothing of this slot.
	var identity []StatusWarning
	if r.Checkpoint.Exists {
		identity = identityWarnings(r)
	}
	resumable := r.Checkpoint.Exists && len(identity) == 0
	// What run does with a gap in the stream: it refuses, unless told.
	gap := "outboxd run refuses to start"
	if cfg.AllowGap {
		gap = "outboxd run starts anyway (--allow-gap) without them"
	}
	if !r.Slot.Exists && !r.Slot.unreadable && resumable {
		add("slot_missing", !cfg.AllowGap, "replication slot %q does not exist but checkpoint %s is at %s: the slot was dropped, "+
			"so events committed since then are not in WAL any more, and %s; find and republish the rows "+
			"committed in between, then start it with --allow-gap; or delete the checkpoint (%s) to start from a new slot",
			r.Slot.Name, r.Checkpoint.Store, r.Checkpoint.LSN, gap, r.Checkpoint.store.DeleteCommand())
	} else {
		out = append(out, r.Slot.warning("slot", false)...)
	}
	out = append(out, r.Publication.warning("publication", true)...)
	out = append(out, r.Stream.warning("stream", !cfg.CreateStream)...)
	if r.Checkpoint.unreadable {
		out = append(out, r.Checkpoint.warning("checkpoint", true)...)
	}
	if r.Slot.Exists {
		out = append(out, slotWarnings(r.Slot, retainedLimit)...)
	}
	for _, problem := range append(r.failover.Problems(r.Slot.Name, cfg.SlotFailover), r.standbyProblems...) {
		add("failover_setup", false, "%s", problem)
	}
	if r.failoverErr != nil {
		add("failover_setup", false, "cannot check the failover set-up: %v", r.failoverErr)
	}
	if r.Publication.Exists && !r.Publication.HoldsTable {
		add("publication_lacks_table", true, "publication %q does not publish the inserts of %s: outboxd run refuses to start; ALTER PUBLICATION %s ADD TABLE %s (and SET (publish = 'insert'))",
			r.Publication.Name, r.Publication.Table, pgx.Identifier{r.Publication.Name}.Sanitize(), r.Publication.Table)
	}
	out = append(out, identity...)
	if w, ok := pastServerWALWarning(r, resumable, cfg.AllowGap); ok {
		out = append(out, w)
	}
	if resumable && r.Slot.Exists && r.Checkpoint.lsn < r.Slot.info.ConfirmedFlush {
		add("checkpoint_behind_slot", !cfg.AllowGap,
			"checkpoint %s is at %s, behind the slot's confirmed_flush_lsn %s: something outside outboxd advanced or recreated the slot, so events committed in between were never published, and %s; republish them, then start once with --allow-gap",
			r.Checkpoint.Store, r.Checkpoint.LSN, r.Slot.ConfirmedFlushLSN, gap)
	}
	return out
}

func slotWarnings(s SlotReport, retainedLimit int64) []StatusWarning {
	var out []StatusWarning
	if problem := s.info.Usable(); problem != "" {
		out = append(out, StatusWarning{Code: "slot_unusable", BlocksRun: true,
			Message: fmt.Sprintf("replication slot %q %s: outboxd run refuses to start on it", s.Name, problem)})
	}
	if !s.Active && s.info.IdleTimeout > 0 && s.WALStatus != "lost" {
		since, by := "", ""
		if !s.info.InactiveSince.IsZero() {
			since = " since " + s.info.InactiveSince.UTC().Format(time.RFC3339)
			by = ", at the first checkpoint after " + s.info.InactiveSince.Add(s.info.IdleTimeout).UTC().Format(time.RFC3339)
		}
		out = append(out, StatusWarning{Code: "slot_idle_timeout", Message: fmt.Sprintf(
			"replication slot %q is inactive%s, and the server invalidates a slot inactive longer than idle_replication_slot_timeout (%s)%s: "+
				"the events committed since would then have to be recovered from the outbox table; start outboxd run before then, "+
				"or raise the setting (ALTER SYSTEM SET idle_replication_slot_timeout = ...; SELECT pg_reload_conf())",
			s.Name, since, s.info.IdleTimeout, by)})
	}
	if s.WALStatus == "unreserved" {
		out = append(out, StatusWarning{Code: "slot_wal_at_risk", Message: fmt.Sprintf("replication slot %q has wal_status unreserved: it holds more WAL than max_slot_wal_keep_size and loses it at the next checkpoint; start outboxd run so it catches up", s.Name)})
	}
	if !s.Active && s.RetainedWALBytes > retainedLimit {
		out = append(out, StatusWarning{Code: "slot_inactive_retaining_wal", Message: fmt.Sprintf(
			"replication slot %q is inactive and retains %s of WAL (over --warn-retained-mib %d): the server's disk fills until an outboxd streams from it again; start outboxd run, or drop the slot if it is abandoned (`outboxd slot drop --slot %s`; events not yet published are lost)",
			s.Name, humanBytes(s.RetainedWALBytes), retainedLimit>>20, s.Name)})
	}
	return out
}

// identityWarnings are the checkpoint's identity checks that outboxd run
// makes first when it resumes (checkpoint.Checkpoint.Matches), with the
// same text and how to recover. --allow-gap does not get past them.
func identityWarnings(r StatusReport) []StatusWarning {
	var out []StatusWarning
	c, server, slot := r.Checkpoint, r.Server, r.Slot.Name
	mismatch := func(code, field, saved, current, fix string) {
		err := &checkpoint.MismatchError{Field: field, Saved: saved, Current: current}
		out = append(out, StatusWarning{Code: code, BlocksRun: true,
			Message: fmt.Sprintf("checkpoint %s: %v; outboxd run refuses to start with it, even with --allow-gap; %s", c.Store, err, fix)})
	}
	deleteIt := fmt.Sprintf("delete the checkpoint (%s): outboxd run then starts from replication slot %q", c.store.DeleteCommand(), slot)
	if server.Exists && c.SystemID != server.SystemID {
		mismatch("checkpoint_other_cluster", "system_id", c.SystemID, server.SystemID,
			"if --pg-url names the wrong server, correct it; if it is the right one (re-created, or restored from a dump), "+deleteIt+", creating it if missing")
	}
	if server.Exists && server.Timeline != 0 && c.SystemID == server.SystemID && c.Timeline != server.Timeline {
		out = append(out, timelineWarning(r))
	}
	if c.Slot != slot {
		mismatch("checkpoint_other_slot", "slot", c.Slot, slot,
			"point --checkpoint at the checkpoint of this slot's relay: each slot has its own")
	}
	return out
}

// timelineWarning is a checkpoint saved on another timeline than the
// server's: after a promotion or a point-in-time restore. outboxd run
// resumes when the server's timeline history passes through the checkpoint
// and the slot exists (it reads the history on its replication
// connection, which status does not open); without the slot it stops with
// the recovery from the outbox table.
func timelineWarning(r StatusReport) StatusWarning {
	c, server := r.Checkpoint, r.Server
	if c.Timeline > server.Timeline {
		// A timeline's ancestors have lower numbers.
		return StatusWarning{Code: "checkpoint_other_timeline", BlocksRun: true, Message: fmt.Sprintf("%v; "+
			"outboxd run refuses to start with it, even with --allow-gap; once the stream is checked, delete the checkpoint (%s): "+
			"outboxd run then starts from replication slot %q",
			notInHistory(c.store, c.Timeline, server.Timeline), c.store.DeleteCommand(), r.Slot.Name)}
	}
	msg := fmt.Sprintf("checkpoint %s was saved on timeline %d and the server is on timeline %d: it was promoted (a failover) or restored "+
		"to a point in time since; ", c.Store, c.Timeline, server.Timeline)
	if !r.Slot.Exists {
		return StatusWarning{Code: "checkpoint_other_timeline", BlocksRun: true, Message: msg + fmt.Sprintf("replication slot %q did not come "+
			"along (before PostgreSQL 17 a logical slot lives only on the primary), so outboxd run stops with the recovery steps from "+
			"the outbox table (see the runbook, \"Primary failover\")", r.Slot.Name)}
	}
	return StatusWarning{Code: "checkpoint_other_timeline", Message: msg + "outboxd run resumes if the server's timeline history passes " +
		"through the checkpoint, and otherwise stops saying why (see the runbook, \"Primary failover\")"}
}

// pastServerWALWarning is outboxd run's refusal of a slot, or a checkpoint
// it resumes from, past the end of the server's WAL: the database was
// restored from an older copy of itself.
func pastServerWALWarning(r StatusReport, resumable, allowGap bool) (StatusWarning, bool) {
	if !r.Server.Exists || r.Server.WALFlushLSN == "" {
		return StatusWarning{}, false
	}
	slot := replication.SlotState{Exists: r.Slot.Exists, ConfirmedFlush: r.Slot.info.ConfirmedFlush}
	err := pastServerWAL(resumeFacts{
		identity: checkpoint.Checkpoint{Slot: r.Slot.Name}, serverWALEnd: r.Server.walEnd, slot: slot,
		saved: r.Checkpoint.saved, hasCheckpoint: resumable, store: r.Checkpoint.store,
	})
	if err == nil {
		return StatusWarning{}, false
	}
	code := "checkpoint_past_server_wal"
	if slot.Exists && slot.ConfirmedFlush > r.Server.walEnd {
		code = "slot_past_server_wal"
	}
	return StatusWarning{Code: code, Message: err.Error(), BlocksRun: !allowGap}, true
}
