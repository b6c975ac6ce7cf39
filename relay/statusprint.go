package relay

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/outboxd/outboxd/replication"
)

// WriteText prints the report as a table for people: one block per
// section, then what blocks outboxd run, then the other warnings.
func (r StatusReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	writeServer(tw, r.Server)
	fmt.Fprintln(tw)
	writeSlot(tw, r.Slot)
	fmt.Fprintln(tw)
	writePublication(tw, r.Publication)
	fmt.Fprintln(tw)
	writeStream(tw, r.Stream)
	fmt.Fprintln(tw)
	writeCheckpoint(tw, r.Checkpoint)
	writeWarnings(tw, r.Warnings)
	return tw.Flush()
}

// section prints a block's title and, when the object is not there, why.
func section(w io.Writer, title string, p presence) bool {
	fmt.Fprintf(w, "%s\n", title)
	if !p.Exists {
		fmt.Fprintf(w, "  %s\t%s\n", "problem", p.Problem)
	}
	return p.Exists
}

func writeServer(w io.Writer, s ServerReport) {
	if !section(w, "postgresql server", s.presence) {
		return
	}
	level := s.WALLevel
	if level != "logical" {
		level += "  (outboxd needs logical)"
	}
	timeline := fmt.Sprintf("timeline %d", s.Timeline)
	if s.Timeline == 0 {
		timeline = "timeline not read on a standby"
	}
	rows(w,
		"wal_level", level,
		"system", fmt.Sprintf("%s (%s)", s.SystemID, timeline),
		"WAL flushed to", orNone(s.WALFlushLSN),
	)
}

func writeSlot(w io.Writer, s SlotReport) {
	if !section(w, fmt.Sprintf("slot %s", s.Name), s.presence) {
		return
	}
	active := "no  (no process streams from it)"
	if s.Active {
		active = fmt.Sprintf("yes, pid %d", s.ActivePID)
		if s.ActiveApplication != "" {
			active += fmt.Sprintf(" (%s)", s.ActiveApplication)
		}
	}
	rows(w,
		"plugin", fmt.Sprintf("%s (%s slot, database %s)", orNone(s.Plugin), s.Type, orNone(s.Database)),
		"active", active,
		"confirmed_flush_lsn", s.ConfirmedFlushLSN,
		"restart_lsn", s.RestartLSN,
		"wal_status", s.WALStatus,
		"retained WAL", humanBytes(s.RetainedWALBytes)+"  (current WAL "+s.CurrentWALLSN+" - restart_lsn)",
		"lag", humanBytes(s.LagBytes)+"  (current WAL - confirmed_flush_lsn)",
	)
}

func writePublication(w io.Writer, p PublicationReport) {
	if !section(w, fmt.Sprintf("publication %s", p.Name), p.presence) {
		return
	}
	tables := strings.Join(p.Tables, ", ")
	if p.AllTables {
		tables = "all tables"
	}
	rows(w,
		"publishes inserts", yesNo(p.PublishesInsert),
		"tables", orNone(tables),
		"holds "+p.Table, yesNo(p.HoldsTable),
	)
}

func writeStream(w io.Writer, s StreamReport) {
	if !section(w, fmt.Sprintf("stream %s", s.Name), s.presence) {
		return
	}
	rows(w,
		"subjects", strings.Join(s.Subjects, ", "),
		"messages", strconv.FormatUint(s.Messages, 10),
		"bytes", humanBytes(int64(s.Bytes)),
		"replicas", strconv.Itoa(s.Replicas),
		"storage", s.Storage,
		"duplicate window", s.DuplicateWindow,
	)
}

func writeCheckpoint(w io.Writer, c CheckpointReport) {
	if !section(w, fmt.Sprintf("checkpoint %s", c.Store), c.presence) {
		return
	}
	rows(w,
		"lsn", c.LSN,
		"saved at", c.SavedAt,
		"for slot", fmt.Sprintf("%s (system %s, timeline %d)", c.Slot, c.SystemID, c.Timeline),
	)
}

// writeWarnings lists first what blocks outboxd run, under a heading of
// its own and only when there is some, then the other warnings.
func writeWarnings(w io.Writer, warnings []StatusWarning) {
	var blocking, others []StatusWarning
	for _, warning := range warnings {
		if warning.BlocksRun {
			blocking = append(blocking, warning)
		} else {
			others = append(others, warning)
		}
	}
	if len(blocking) > 0 {
		fmt.Fprintf(w, "\nblocking outboxd run: %d\n", len(blocking))
		writeList(w, blocking)
	}
	if len(others) == 0 {
		fmt.Fprintln(w, "\nwarnings: none")
		return
	}
	fmt.Fprintf(w, "\nwarnings: %d\n", len(others))
	writeList(w, others)
}

func writeList(w io.Writer, warnings []StatusWarning) {
	for _, warning := range warnings {
		// Not through the tab columns: a message is one long line.
		fmt.Fprintf(w, "  - [%s] %s\n", warning.Code, strings.ReplaceAll(warning.Message, "\t", " "))
	}
}

// rows prints label/value pairs as aligned rows.
func rows(w io.Writer, pairs ...string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(w, "  %s\t%s\n", pairs[i], pairs[i+1])
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// humanBytes is n in B, KiB, MiB or GiB, with the exact count beside
// anything over 1 KiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	value, suffix := float64(n)/unit, "KiB"
	for _, next := range []string{"MiB", "GiB", "TiB"} {
		if value < unit {
			break
		}
		value, suffix = value/unit, next
	}
	return fmt.Sprintf("%.1f %s (%d bytes)", value, suffix, n)
}

// WriteText writes the slot as outboxd slot info shows it: the same rows
// as status's slot section, and why outboxd cannot use it, if so.
func (s SlotReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	writeSlot(tw, s)
	if problem := s.info.Usable(); problem != "" {
		fmt.Fprintf(tw, "  outboxd cannot use it: it %s\n", problem)
	}
	return tw.Flush()
}

// ExplainDrop says what dropping this slot loses, with its numbers.
func ExplainDrop(w io.Writer, s replication.SlotInfo) {
	fmt.Fprintf(w, "Dropping replication slot %q (plugin %s, confirmed_flush_lsn %s, %s of WAL written since):\n",
		s.Name, orNone(s.Plugin), s.ConfirmedFlush, humanBytes(s.LagBytes))
	fmt.Fprintln(w, "  - events committed but not yet published (after confirmed_flush_lsn) are lost: no outboxd can read them again;")
	fmt.Fprintln(w, "  - a new slot (outboxd slot create, or outboxd run) starts at its own consistent point: only later commits are streamed;")
	fmt.Fprintln(w, "  - while a checkpoint of this slot exists, outboxd run refuses to start on the new one: republish the lost events, then start it once with --allow-gap.")
	if s.Active {
		fmt.Fprintf(w, "The slot is active: server process %d%s holds it.\n", s.ActivePID, applicationOf(s))
	}
}

func applicationOf(s replication.SlotInfo) string {
	if s.ActiveApplication == "" {
		return ""
	}
	return fmt.Sprintf(" (%s)", s.ActiveApplication)
}
