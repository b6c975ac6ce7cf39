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
	Slot        SlotReport        `json:"slot"`
	Publication PublicationReport `json:"publication"`
	Stream      StreamReport      `json:"stream"`
	Checkpoint  CheckpointReport  `json:"checkpoint"`
	// Warnings is never null: an empty list means nothing needs attention.
	Warnings []StatusWarning `json:"warnings"`
}

// presence says whether a section's object exists; Problem says why it
// is missing or could not be read, with the fix. A section's other fields
// are meaningful only when Exists is true.
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

// warning is the warning for a section that is missing or unreadable.
func (p presence) warning(what string) []StatusWarning {
	switch {
	case p.Exists:
		return nil
	case p.unreadable:
		return []StatusWarning{{what + "_unreadable", p.Problem}}
	}
	return []StatusWarning{{what + "_missing", p.Problem}}
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

	lsn pglogrepl.LSN
}

// StatusWarning is one thing that needs attention. Code is stable (see the
// list in docs/operations.md); Message says what and what to do.
type StatusWarning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
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
	gatherPostgres(ctx, cfg, &r)
	gatherNATS(ctx, cfg, opts.ConnectNATS, &r)
	r.Warnings = append(r.Warnings, derivedWarnings(r, opts.RetainedMiB<<20)...)
	return r
}

func gatherPostgres(ctx context.Context, cfg Config, r *StatusReport) {
	conn, err := ConnectPostgres(ctx, cfg.PGURL)
	if err != nil {
		err = fmt.Errorf("cannot read: %w", err)
		r.Slot.fail(err, nil)
		r.Publication.fail(err, nil)
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
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
		return
	}
	r.Stream = StreamReport{
		Name: info.Name, presence: presence{Exists: true}, Subjects: info.Subjects, Messages: info.Messages, Bytes: info.Bytes,
		Replicas: info.Replicas, Storage: info.Storage,
		DuplicateWindow: info.DuplicateWindow.String(), DuplicateWindowSeconds: info.DuplicateWindow.Seconds(),
	}
	for _, w := range info.Warnings {
		r.Warnings = append(r.Warnings, StatusWarning{"stream_settings", w})
	}
	durability, err := sink.CheckDurability(ctx, js, cfg.Stream, cfg.NATSMonitorURL)
	if err != nil {
		r.Warnings = append(r.Warnings, StatusWarning{"stream_durability_unknown",
			fmt.Sprintf("cannot check whether stream %q survives a power failure: %v", cfg.Stream, err)})
	}
	for _, w := range durability {
		r.Warnings = append(r.Warnings, StatusWarning{"stream_single_replica", w})
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
		Slot: cp.Slot, SystemID: cp.SystemID, Timeline: cp.Timeline, lsn: cp.LSN,
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
// missing or unusable objects, an idle slot holding WAL, and a checkpoint
// that the slot has passed.
func derivedWarnings(r StatusReport, retainedLimit int64) []StatusWarning {
	var out []StatusWarning
	add := func(code, format string, args ...any) {
		out = append(out, StatusWarning{code, fmt.Sprintf(format, args...)})
	}
	out = append(out, r.Slot.warning("slot")...)
	out = append(out, r.Publication.warning("publication")...)
	out = append(out, r.Stream.warning("stream")...)
	if r.Checkpoint.unreadable {
		out = append(out, r.Checkpoint.warning("checkpoint")...)
	}
	if r.Slot.Exists {
		out = append(out, slotWarnings(r.Slot, retainedLimit)...)
	}
	if r.Publication.Exists && !r.Publication.HoldsTable {
		add("publication_lacks_table", "publication %q does not publish the inserts of %s: outboxd run refuses to start; ALTER PUBLICATION %s ADD TABLE %s (and SET (publish = 'insert'))",
			r.Publication.Name, r.Publication.Table, pgx.Identifier{r.Publication.Name}.Sanitize(), r.Publication.Table)
	}
	if r.Slot.Exists && r.Checkpoint.Exists {
		out = append(out, checkpointWarnings(r.Slot, r.Checkpoint)...)
	}
	return out
}

func slotWarnings(s SlotReport, retainedLimit int64) []StatusWarning {
	var out []StatusWarning
	if problem := s.info.Usable(); problem != "" {
		out = append(out, StatusWarning{"slot_unusable", fmt.Sprintf("replication slot %q %s: outboxd run refuses to start on it", s.Name, problem)})
	}
	if s.WALStatus == "unreserved" {
		out = append(out, StatusWarning{"slot_wal_at_risk", fmt.Sprintf("replication slot %q has wal_status unreserved: it holds more WAL than max_slot_wal_keep_size and loses it at the next checkpoint; start outboxd run so it catches up", s.Name)})
	}
	if !s.Active && s.RetainedWALBytes > retainedLimit {
		out = append(out, StatusWarning{"slot_inactive_retaining_wal", fmt.Sprintf(
			"replication slot %q is inactive and retains %s of WAL (over --warn-retained-mib %d): the server's disk fills until an outboxd streams from it again; start outboxd run, or drop the slot if it is abandoned (`outboxd slot drop --slot %s`; events not yet published are lost)",
			s.Name, humanBytes(s.RetainedWALBytes), retainedLimit>>20, s.Name)})
	}
	return out
}

func checkpointWarnings(s SlotReport, c CheckpointReport) []StatusWarning {
	var out []StatusWarning
	if c.Slot != s.Name {
		out = append(out, StatusWarning{"checkpoint_other_slot", fmt.Sprintf("checkpoint %s was written for slot %q, not %q: outboxd run refuses to start with it", c.Store, c.Slot, s.Name)})
	}
	if c.lsn < s.info.ConfirmedFlush {
		out = append(out, StatusWarning{"checkpoint_behind_slot", fmt.Sprintf(
			"checkpoint %s is at %s, behind the slot's confirmed_flush_lsn %s: something outside outboxd advanced or recreated the slot, so events committed in between were never published, and outboxd run refuses to start; republish them, then start once with --allow-gap",
			c.Store, c.LSN, s.ConfirmedFlushLSN)})
	}
	return out
}
