package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/checkpoint"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
	"github.com/outboxd/outboxd/internal/testenv/pgtest"
	"github.com/outboxd/outboxd/internal/testenv/testsync"
	"github.com/outboxd/outboxd/relay"
	"github.com/outboxd/outboxd/replication"
	"github.com/outboxd/outboxd/sink"
)

// TestStatusAndSlotBadInput: bad flags of status and slot stop them before
// they connect, with the flag, the value and what is accepted.
func TestStatusAndSlotBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"negative threshold", []string{"status", "--warn-retained-mib", "-1"}, []string{"--warn-retained-mib -1", "0 or more"}},
		{"threshold not a number", []string{"status", "--warn-retained-mib", "lots"}, []string{"lots", "warn-retained-mib"}},
		{"timeout too short", []string{"status", "--timeout", "10ms"}, []string{"--timeout 10ms", "1s to 10m"}},
		{"status slot name", []string{"status", "--slot", "Bad-Slot"}, []string{`"Bad-Slot"`, "lower-case letters, digits or underscores"}},
		{"create slot name", []string{"slot", "create", "--slot", "bad slot"}, []string{`--slot: slot name "bad slot" is invalid`}},
		{"info slot name", []string{"slot", "info", "--slot", "x;drop"}, []string{`"x;drop"`}},
		{"drop slot name", []string{"slot", "drop", "--slot", strings.Repeat("s", 64), "--yes"}, []string{strings.Repeat("s", 64), "1-63"}},
		{"run slot name", []string{"run", "--slot", "Outboxd"}, []string{`--slot: slot name "Outboxd" is invalid`}},
		{"status bad pg url", []string{"status", "--pg-url", "postgres://u:secret@db:port/app"}, []string{"--pg-url", "postgres://user@host:5432/dbname"}},
		{"status bad nats url", []string{"status", "--nats-url", " , "}, []string{`--nats-url " , " is not a URL`, "nats://host:4222"}},
		{"status bad monitor url", []string{"status", "--nats-monitor-url", "127.0.0.1:8222"}, []string{`--nats-monitor-url "127.0.0.1:8222"`, "http://host:8222"}},
		{"info bad pg url", []string{"slot", "info", "--pg-url", "postgres://u@db:port/app"}, []string{"--pg-url", "postgres://user@host:5432/dbname"}},
		{"drop bad pg url", []string{"slot", "drop", "--pg-url", "host=db port=x", "--yes"}, []string{"--pg-url"}},
		{"slot without subcommand argument", []string{"slot", "create", "extra"}, []string{"unknown command", "extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := execute(t, newRootCommand(), tt.args, nil)
			if err == nil {
				t.Fatalf("%v succeeded, want an error", tt.args)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

// TestStatusMissingEverything: on a bare database and an empty NATS
// server, status reports each object missing with what creates it, and
// exits non-zero for those outboxd run cannot do without (the publication,
// the stream unless --create-stream), not for the slot, which run creates;
// with NATS down, the stream is unreadable and the rest still shows.
func TestStatusMissingEverything(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	ns := natstest.Start(t)
	args := []string{"status", "--pg-url", dsn, "--nats-url", ns.URL(), "--slot", "status_missing", "--json"}
	out, _, err := execute(t, newRootCommand(), args, nil)
	if err == nil || err.Error() != errStatusBlocks {
		t.Errorf("status = %v, want %q", err, errStatusBlocks)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	for section, fix := range map[string]string{
		"slot":        "outboxd slot create --slot status_missing` (outboxd run also creates it)",
		"publication": "outboxd migrate",
		"stream":      "nats stream add OUTBOX",
		"checkpoint":  "none saved yet",
	} {
		s := r[section].(map[string]any)
		if s["exists"] != false || !strings.Contains(s["problem"].(string), fix) {
			t.Errorf("%s = %v, want exists false and a problem naming %q", section, s, fix)
		}
	}
	if codes := warningCodes(t, r); codes != "slot_missing,publication_missing+,stream_missing+" {
		t.Errorf("warnings %s, want slot_missing,publication_missing+,stream_missing+ (+: blocks_run)", codes)
	}
	if r["blocks_run"] != true {
		t.Errorf("blocks_run = %v, want true", r["blocks_run"])
	}

	// The table for people: the missing slot is a warning, the rest blocks.
	out, _, _ = execute(t, newRootCommand(), args[:len(args)-1], nil)
	blocking, warnings, _ := strings.Cut(out, "\nwarnings: 1\n")
	if !strings.Contains(blocking, "blocking outboxd run: 2\n  - [publication_missing]") || !strings.Contains(blocking, "\n  - [stream_missing]") ||
		!strings.HasPrefix(warnings, "  - [slot_missing] replication slot \"status_missing\": replication slot does not exist") {
		t.Errorf("status lists, want publication_missing and stream_missing blocking, slot_missing a warning:\n%s", out)
	}

	// With --create-stream, run makes the stream: no longer blocking.
	out, _, _ = execute(t, newRootCommand(), append(args, "--create-stream"), nil)
	var created relay.StatusReport
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	if codes := reportCodes(created); codes != "slot_missing,publication_missing+,stream_missing" ||
		created.Stream.Problem != `stream "OUTBOX" does not exist: outboxd run creates it (--create-stream)` {
		t.Errorf("with --create-stream: warnings %s, stream problem %q; want stream_missing not blocking, saying run creates it", codes, created.Stream.Problem)
	}

	ns.Shutdown()
	out, _, err = execute(t, newRootCommand(), args[:len(args)-1], nil)
	if err == nil {
		t.Errorf("status with NATS down succeeded, want %q", errStatusBlocks)
	}
	for _, want := range []string{"stream OUTBOX", "cannot read: connect to NATS", "[stream_unreadable]", "[checkpoint_unreadable]", "[slot_missing]"} {
		if !strings.Contains(out, want) {
			t.Errorf("status with NATS down lacks %q:\n%s", want, out)
		}
	}
}

// errStatusBlocks is the error of a status that found what blocks run.
const errStatusBlocks = "status found problems that block outboxd run (see above)"

// TestStatusUnreachable: a PostgreSQL that does not answer makes the
// PostgreSQL sections unreadable (status still prints, the stream shows,
// and it exits non-zero: run cannot relay); slot info and drop fail naming
// --pg-url.
func TestStatusUnreachable(t *testing.T) {
	ns := natstest.Start(t)
	addr := freeAddr(t)
	down := "postgres://outboxd@" + addr + "/app?connect_timeout=2"
	out, _, err := execute(t, newRootCommand(), []string{"status", "--pg-url", down, "--nats-url", ns.URL(), "--json", "--create-stream"}, nil)
	if err == nil || err.Error() != errStatusBlocks {
		t.Errorf("status with PostgreSQL down = %v, want %q", err, errStatusBlocks)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	if codes := warningCodes(t, r); codes != "slot_unreadable+,publication_unreadable+,stream_missing" {
		t.Errorf("warnings %s, want slot_unreadable+,publication_unreadable+,stream_missing", codes)
	}
	for _, section := range []string{"server", "slot"} {
		if p := r[section].(map[string]any)["problem"].(string); !strings.Contains(p, "connect to PostgreSQL (--pg-url)") {
			t.Errorf("%s problem %q, want it to name --pg-url", section, p)
		}
	}
	for _, args := range [][]string{{"slot", "info"}, {"slot", "drop", "--yes"}, {"slot", "create"}} {
		if _, _, err := execute(t, newRootCommand(), append(args, "--pg-url", down), nil); err == nil ||
			!strings.Contains(err.Error(), "connect to PostgreSQL") || !strings.Contains(err.Error(), addr) {
			t.Errorf("%v with PostgreSQL down = %v, want an error naming the server", args, err)
		}
	}
}

// TestStatusWALLevel: on a server started with wal_level=replica, status
// shows the setting, lists it as blocking outboxd run with the fix, and
// exits non-zero after printing the report, text or JSON; run refuses to
// start for the same reason.
func TestStatusWALLevel(t *testing.T) {
	dsn, _ := pgtest.Start(t, pgtest.WithConf("wal_level", "replica")).MigratedDatabase(t)
	ns := natstest.Start(t)
	args := []string{"status", "--pg-url", dsn, "--nats-url", ns.URL(), "--create-stream"}
	out, _, err := execute(t, newRootCommand(), args, nil)
	if err == nil || err.Error() != errStatusBlocks {
		t.Errorf("status = %v, want %q", err, errStatusBlocks)
	}
	t.Logf("outboxd status:\n%s", out)
	const problem = `server setting wal_level is "replica", logical replication needs "logical": outboxd run refuses to start ` +
		"and no replication slot can be created; fix: ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL"
	words := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"postgresql server wal_level replica (outboxd needs logical)",
		"blocking outboxd run: 1 - [wal_level_not_logical] " + problem} {
		if !strings.Contains(words, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	out, _, err = execute(t, newRootCommand(), append(args, "--json"), nil)
	var r relay.StatusReport
	if jsonErr := json.Unmarshal([]byte(out), &r); jsonErr != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", jsonErr, out)
	}
	if err == nil || r.Server.WALLevel != "replica" || !r.BlocksRun || reportCodes(r) != "wal_level_not_logical+,slot_missing,stream_missing" ||
		r.Warnings[0].Message != problem {
		t.Errorf("status --json = %v, wal_level %q, blocks_run %v, warnings %+v; want replica, blocking run with wal_level_not_logical",
			err, r.Server.WALLevel, r.BlocksRun, r.Warnings)
	}

	cfg := defaultRunConfig()
	cfg.PGURL, cfg.NATSURL, cfg.CreateStream, cfg.MetricsAddr = dsn, ns.URL(), true, freeAddr(t)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if err := runRelay(context.Background(), cfg, zerolog.Nop()); err == nil ||
		!strings.Contains(err.Error(), `is "replica", logical replication needs "logical"`) || !strings.Contains(err.Error(), "ALTER SYSTEM SET wal_level = logical") {
		t.Errorf("run = %v, want it to refuse wal_level replica as status says", err)
	}
}

// TestStatusCheckpointAgainstServer: a checkpoint that outboxd run refuses
// on this server (one of another cluster, of another timeline, or past the
// end of the server's WAL) is listed as blocking run, in run's own words
// and with the way out; run indeed refuses it, and status exits non-zero.
func TestStatusCheckpointAgainstServer(t *testing.T) {
	otherDSN := pgtest.Start(t).NewDatabase(t) // a cluster of its own: another system identifier
	dsn, conn := pgtest.Shared(t).MigratedDatabase(t)
	ns := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	systemID := func(dsn string) string {
		t.Helper()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var id string
		if err := c.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	here, other := systemID(dsn), systemID(otherDSN)
	const slot = "status_identity"
	if _, _, err := execute(t, newRootCommand(), []string{"slot", "create", "--pg-url", dsn, "--slot", slot}, nil); err != nil {
		t.Fatal(err)
	}
	var confirmed, end pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT confirmed_flush_lsn, pg_current_wal_flush_lsn() FROM pg_replication_slots WHERE slot_name = $1", slot).
		Scan(&confirmed, &end); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		saved   checkpoint.Checkpoint
		code    string
		runSays string // in run's refusal and status's warning
	}{
		{"another cluster", checkpoint.Checkpoint{LSN: confirmed, SystemID: other, Timeline: 1, Slot: slot},
			"checkpoint_other_cluster", fmt.Sprintf("checkpoint system_id is %q but the server reports %q: outboxd is connected to a different database cluster", other, here)},
		{"another timeline", checkpoint.Checkpoint{LSN: confirmed, SystemID: here, Timeline: 2, Slot: slot},
			"checkpoint_other_timeline", `checkpoint timeline is "2" but the server reports "1"`},
		{"past the server's WAL", checkpoint.Checkpoint{LSN: end + 1<<30, SystemID: here, Timeline: 1, Slot: slot, SavedAt: time.Now()},
			"checkpoint_past_server_wal", "past the end of the server's WAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoint.json")
			if err := checkpoint.NewFileStore(path).Save(ctx, tt.saved); err != nil {
				t.Fatal(err)
			}
			out, _, err := execute(t, newRootCommand(), []string{"status", "--pg-url", dsn, "--nats-url", ns.URL(), "--slot", slot,
				"--checkpoint", "file:" + path, "--create-stream", "--json"}, nil)
			if err == nil || err.Error() != errStatusBlocks {
				t.Errorf("status = %v, want %q", err, errStatusBlocks)
			}
			var r relay.StatusReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("status --json is not JSON: %v\n%s", err, out)
			}
			var blocking []relay.StatusWarning
			for _, w := range r.Warnings {
				if w.BlocksRun {
					blocking = append(blocking, w)
				}
			}
			if len(blocking) != 1 || blocking[0].Code != tt.code {
				t.Fatalf("warnings %s, want %s+ alone blocking run: %+v", reportCodes(r), tt.code, r.Warnings)
			}
			got := blocking[0].Message

			cfg := defaultRunConfig()
			cfg.PGURL, cfg.NATSURL, cfg.Slot, cfg.CreateStream, cfg.MetricsAddr = dsn, ns.URL(), slot, true, freeAddr(t)
			cfg.Checkpoint = "file:" + path
			if err := cfg.validate(); err != nil {
				t.Fatal(err)
			}
			runErr := runRelay(ctx, cfg, zerolog.Nop())
			if runErr == nil || !strings.Contains(runErr.Error(), tt.runSays) {
				t.Fatalf("run = %v, want it to refuse: %s", runErr, tt.runSays)
			}
			// Run's refusal, word for word but for where the server's WAL
			// ended when each looked, and the way out (deleting the file).
			if !strings.Contains(lsnsAside(got), lsnsAside(runErr.Error())) || !strings.Contains(got, "rm "+path) {
				t.Errorf("%s says\n  %s\nwant it to hold run's refusal\n  %s\nand how to delete the checkpoint (rm %s)", tt.code, got, runErr, path)
			}
		})
	}
}

// lsnsAside replaces every WAL position in s with X/Y.
func lsnsAside(s string) string { return lsnPattern.ReplaceAllString(s, "X/Y") }

var lsnPattern = regexp.MustCompile(`\b[0-9A-F]{1,8}/[0-9A-F]{1,8}\b`)

// TestStatusSyncAlways: stream_single_replica is about a single replica
// on a server that does not fsync every write: absent when the monitoring
// endpoint says sync_interval always, a warning that it cannot tell without
// --nats-monitor-url, stream_durability_unknown when that URL does not answer.
func TestStatusSyncAlways(t *testing.T) {
	dsn, _ := pgtest.Shared(t).MigratedDatabase(t)
	ns := natstest.Start(t, natstest.WithMonitoring(), natstest.WithSyncAlways())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	template, err := sink.ParseTemplate(defaultRunConfig().Subject)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.EnsureStream(ctx, ns.JetStream(t), "OUTBOX", template, true); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, monitorURL, want, message string
	}{
		{"sync always", ns.MonitorURL(), "", ""},
		{"no monitoring URL", "", "stream_single_replica", "set --nats-monitor-url"},
		{"monitoring URL down", "http://" + freeAddr(t), "stream_durability_unknown", "cannot check whether stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"status", "--pg-url", dsn, "--nats-url", ns.URL(), "--json", "--nats-monitor-url", tt.monitorURL}
			out, _, err := execute(t, newRootCommand(), args, nil)
			if err != nil {
				t.Fatalf("status: %v", err)
			}
			var r relay.StatusReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("status --json is not JSON: %v\n%s", err, out)
			}
			var stream []relay.StatusWarning
			for _, w := range r.Warnings {
				if strings.HasPrefix(w.Code, "stream_") {
					stream = append(stream, w)
				}
			}
			switch {
			case tt.want == "" && len(stream) != 0:
				t.Errorf("stream warnings %+v, want none", stream)
			case tt.want != "" && (len(stream) != 1 || stream[0].Code != tt.want || !strings.Contains(stream[0].Message, tt.message)):
				t.Errorf("stream warnings %+v, want one %s saying %q", stream, tt.want, tt.message)
			}
		})
	}
}

// warningCodes lists the codes of the warnings, each one that blocks run
// with a "+".
func warningCodes(t *testing.T, r map[string]any) string {
	t.Helper()
	var codes []string
	for _, w := range r["warnings"].([]any) {
		code := w.(map[string]any)["code"].(string)
		if w.(map[string]any)["blocks_run"] == true {
			code += "+"
		}
		codes = append(codes, code)
	}
	return strings.Join(codes, ",")
}

// TestSlotCommands runs slot create, info and drop against a real
// PostgreSQL, with each refusal.
func TestSlotCommands(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	const slot = "cmd_slot_test"
	t.Cleanup(func() {
		conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ($1, $2)", slot, slot+"_td") //nolint:errcheck
	})
	run := func(args ...string) (string, error) {
		t.Helper()
		out, _, err := execute(t, newRootCommand(), append(args, "--pg-url", dsn), nil)
		return out, err
	}

	if _, err := run("slot", "info", "--slot", slot); err == nil || !strings.Contains(err.Error(), "outboxd slot create --slot "+slot) {
		t.Errorf("info of a missing slot = %v, want the command that creates it", err)
	}
	out, err := run("slot", "create", "--slot", slot)
	if err != nil || !strings.Contains(out, "consistent point") {
		t.Fatalf("create = %q, %v", out, err)
	}
	if _, err := run("slot", "create", "--slot", slot); err == nil || !strings.Contains(err.Error(), "exists already") || !strings.Contains(err.Error(), "outboxd slot drop --slot "+slot) {
		t.Errorf("create of an existing slot = %v, want an error naming it and the way to start over", err)
	}

	out, err = run("slot", "info", "--slot", slot, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var info relay.SlotReport
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("info --json: %v\n%s", err, out)
	}
	var plugin, confirmed, restart string
	if err := conn.QueryRow(ctx, "SELECT plugin, confirmed_flush_lsn::text, restart_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).
		Scan(&plugin, &confirmed, &restart); err != nil {
		t.Fatal(err)
	}
	if !info.Exists || info.Plugin != plugin || info.ConfirmedFlushLSN != confirmed || info.RestartLSN != restart || info.Active {
		t.Errorf("info --json = %+v, want pg_replication_slots' plugin %s, confirmed %s, restart %s, inactive", info, plugin, confirmed, restart)
	}

	// Drop without --yes explains and keeps the slot.
	out, err = run("slot", "drop", "--slot", slot)
	if err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Errorf("drop without --yes = %v, want a refusal asking for --yes", err)
	}
	for _, want := range []string{"not yet published", "are lost", "--allow-gap", "consistent point"} {
		if !strings.Contains(out, want) {
			t.Errorf("drop's explanation lacks %q:\n%s", want, out)
		}
	}
	assertSlot(t, conn, slot, true)

	// --yes and --force only count on the command line.
	if _, _, err := execute(t, newRootCommand(), []string{"slot", "drop", "--slot", slot, "--pg-url", dsn}, map[string]string{"OUTBOXD_YES": "true"}); err == nil || !strings.Contains(err.Error(), "pass --yes") {
		t.Errorf("drop with OUTBOXD_YES=true = %v, want the refusal asking for --yes", err)
	}
	config := filepath.Join(t.TempDir(), "outboxd.yaml")
	if err := os.WriteFile(config, []byte("yes: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("slot", "drop", "--slot", slot, "--config", config); err == nil || !strings.Contains(err.Error(), "only be given on the command line") {
		t.Errorf("drop with yes: true in the config file = %v, want an error that --yes is command line only", err)
	}
	assertSlot(t, conn, slot, true)

	// Held by a walsender: refused, naming the PID; --force terminates it.
	pid := holdSlot(t, dsn, conn, slot)
	if _, err := run("slot", "drop", "--slot", slot, "--yes"); err == nil || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), pidText(pid)) {
		t.Errorf("drop of an active slot = %v, want a refusal naming PID %d and --force", err, pid)
	}
	assertSlot(t, conn, slot, true)
	out, err = run("slot", "drop", "--slot", slot, "--yes", "--force")
	if err != nil || !strings.Contains(out, "terminated server process "+pidText(pid)) || !strings.Contains(out, "dropped replication slot") {
		t.Fatalf("drop --force = %q, %v", out, err)
	}
	assertSlot(t, conn, slot, false)
	if _, err := run("slot", "drop", "--slot", slot, "--yes"); err == nil || !strings.Contains(err.Error(), "nothing to drop") {
		t.Errorf("drop of a missing slot = %v, want nothing to drop", err)
	}

	// A slot of another plugin: create names it, drop refuses before --yes.
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", slot+"_td"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("slot", "create", "--slot", slot+"_td"); err == nil || !strings.Contains(err.Error(), `uses output plugin "test_decoding"`) {
		t.Errorf("create over a test_decoding slot = %v, want an error naming the plugin", err)
	}
	if _, err := run("slot", "drop", "--slot", slot+"_td", "--yes", "--force"); err == nil || !strings.Contains(err.Error(), "another tool") {
		t.Errorf("drop of a test_decoding slot = %v, want a refusal", err)
	}
	assertSlot(t, conn, slot+"_td", true)
	out, err = run("slot", "info", "--slot", slot+"_td")
	if err != nil || !strings.Contains(out, "test_decoding") || !strings.Contains(out, "outboxd cannot use it") {
		t.Errorf("info of a test_decoding slot = %q, %v; want the plugin and that outboxd cannot use it", out, err)
	}
}

func pidText(pid int32) string { return strconv.Itoa(int(pid)) }

func assertSlot(t *testing.T, conn *pgx.Conn, slot string, want bool) {
	t.Helper()
	var exists bool
	if err := conn.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)", slot).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists != want {
		t.Fatalf("slot %s exists = %v, want %v", slot, exists, want)
	}
}

// holdSlot streams from slot on a replication connection, as an outboxd
// would, until the test ends or the server terminates it, and returns the
// walsender's PID.
func holdSlot(t *testing.T, dsn string, conn *pgx.Conn, slot string) int32 {
	t.Helper()
	ctx := context.Background()
	stream, err := replication.Connect(ctx, replication.Config{ConnString: dsn, Slot: slot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Close(context.Background()) }) //nolint:errcheck // terminated by the test
	if err := stream.Start(ctx, 0, func() pglogrepl.LSN { return 0 }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pid *int32
		if err := conn.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if pid != nil {
			return *pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s not active after 10s", slot)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStatusAgainstRealSlot runs the relay in-process against a real
// PostgreSQL and NATS server, streams events, and holds status's report to
// what pg_replication_slots, the stream and the checkpoint store say: while
// the relay streams (slot active, drop refused), after it stopped (exact
// positions, the server's identity as pg_control_system() and the
// relay's checkpoint (from IDENTIFY_SYSTEM) have it, the idle slot's
// retained WAL, no checkpoint warning though the idle relay confirmed past
// other tables' WAL), after the slot was advanced behind the relay's back
// (checkpoint behind slot, blocking run), and after it was dropped (a slot
// missing while the checkpoint stays: run's own refusal).
func TestStatusAgainstRealSlot(t *testing.T) {
	const events, slot = 50, "status_real"
	ns := natstest.Start(t, natstest.WithMonitoring()) // no sync always: a single replica is at risk
	js := ns.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn, conn := pgtest.Shared(t).MigratedDatabase(t)
	t.Cleanup(func() {
		conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot) //nolint:errcheck
	})
	cfg := defaultRunConfig()
	cfg.PGURL, cfg.NATSURL, cfg.Slot, cfg.CreateStream = dsn, ns.URL(), slot, true
	cfg.MetricsAddr = freeAddr(t)
	cfg.StatusInterval, cfg.ShutdownTimeout = 100*time.Millisecond, 10*time.Second
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	args := []string{"status", "--pg-url", dsn, "--nats-url", ns.URL(), "--slot", slot, "--nats-monitor-url", ns.MonitorURL()}
	status := func(extra ...string) relay.StatusReport {
		t.Helper()
		out, _, err := execute(t, newRootCommand(), append(append(args, extra...), "--json"), nil)
		var r relay.StatusReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("status --json is not JSON: %v\n%s", err, out)
		}
		if (err != nil || r.BlocksRun) && (err == nil || err.Error() != errStatusBlocks || !r.BlocksRun) {
			t.Fatalf("status = %v with blocks_run %v, want %q exactly when blocks_run", err, r.BlocksRun, errStatusBlocks)
		}
		return r
	}

	relayCtx, stopRelay := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runRelay(relayCtx, cfg, zerolog.Nop()) }()
	defer stopRelay()
	var pid int32
	testsync.Eventually(t, 30*time.Second, testsync.Until("the slot is active", func() bool {
		return conn.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1 AND active", slot).Scan(&pid) == nil
	}))
	// The slot is active already while the relay creates it: a row
	// committed before its consistent point would never be streamed. The
	// first checkpoint, at that point, is saved once it is made.
	var store *checkpoint.KVStore
	testsync.Eventually(t, 30*time.Second, testsync.Until("the first checkpoint", func() bool {
		var err error
		if store == nil {
			store, err = checkpoint.OpenKVStore(ctx, js, cfg.relay.Checkpoint.Bucket, slot)
		}
		if err == nil {
			_, err = store.Load(ctx)
		}
		return err == nil
	}))
	// The events arrive while status reads: the relay saves checkpoints
	// meanwhile, which must never read as past the server's WAL.
	writeCtx, stopWriting := context.WithCancel(ctx)
	inserted := make(chan error, 1)
	go func() {
		for i := range events {
			if _, err := conn.Exec(writeCtx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
				VALUES (gen_random_uuid(), 'order', $1, 'Created', '{}')`, fmt.Sprint(i%7)); err != nil {
				inserted <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		inserted <- nil
	}()
	writing := true
	t.Cleanup(func() { // before conn closes
		if stopWriting(); writing {
			<-inserted
		}
	})
	for writing {
		if r := status(); r.BlocksRun {
			t.Errorf("status while events stream blocks run: %+v", r.Warnings)
		}
		select {
		case err := <-inserted:
			if writing = false; err != nil {
				t.Fatal(err)
			}
		default:
		}
	}
	var lastInsert pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()").Scan(&lastInsert); err != nil {
		t.Fatal(err)
	}
	testsync.Eventually(t, time.Minute, testsync.Until("the checkpoint past the last insert", func() bool {
		cp, err := store.Load(ctx)
		return err == nil && cp.LSN >= lastInsert
	}))

	// While the relay streams.
	r := status()
	if !r.Slot.Exists || !r.Slot.Active || r.Slot.ActivePID != pid || r.Slot.Plugin != "pgoutput" || r.Slot.Type != "logical" {
		t.Errorf("slot while streaming = %+v, want active logical pgoutput held by PID %d", r.Slot, pid)
	}
	if !r.Publication.Exists || !r.Publication.HoldsTable || strings.Join(r.Publication.Tables, ",") != `"public"."outbox"` {
		t.Errorf("publication = %+v, want it to hold public.outbox", r.Publication)
	}
	if _, _, err := execute(t, newRootCommand(), []string{"slot", "drop", "--pg-url", dsn, "--slot", slot, "--yes"}, nil); err == nil ||
		!strings.Contains(err.Error(), "is active") || !strings.Contains(err.Error(), pidText(pid)) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("slot drop of the relay's slot = %v, want a refusal naming PID %d and --force", err, pid)
	}
	assertSlot(t, conn, slot, true)

	// The idle relay confirms past other tables' WAL: that must not read
	// as a checkpoint behind the slot once it stopped.
	if _, err := conn.Exec(ctx, "CREATE TABLE other (x int); INSERT INTO other SELECT generate_series(1, 10000)"); err != nil {
		t.Fatal(err)
	}
	var otherEnd pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()").Scan(&otherEnd); err != nil {
		t.Fatal(err)
	}
	testsync.Eventually(t, 30*time.Second, testsync.Until("the slot past the other table's WAL", func() bool {
		var confirmed pglogrepl.LSN
		return conn.QueryRow(ctx, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&confirmed) == nil && confirmed >= otherEnd
	}))
	stopRelay()
	if err := <-done; err != nil {
		t.Fatalf("runRelay after stop = %v", err)
	}
	testsync.Eventually(t, 10*time.Second, testsync.Until("the slot is inactive", func() bool {
		var active bool
		return conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active) == nil && !active
	}))

	// Stopped: every field against its source.
	r = status("--warn-retained-mib", "0")
	var want relay.SlotReport
	if err := conn.QueryRow(ctx, `SELECT plugin, confirmed_flush_lsn::text, restart_lsn::text, wal_status,
			pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, slot).
		Scan(&want.Plugin, &want.ConfirmedFlushLSN, &want.RestartLSN, &want.WALStatus, &want.RetainedWALBytes, &want.LagBytes); err != nil {
		t.Fatal(err)
	}
	got := r.Slot
	if got.Active || got.ActivePID != 0 || got.Plugin != want.Plugin || got.ConfirmedFlushLSN != want.ConfirmedFlushLSN ||
		got.RestartLSN != want.RestartLSN || got.WALStatus != want.WALStatus || got.RetainedWALBytes != want.RetainedWALBytes || got.LagBytes != want.LagBytes {
		t.Errorf("slot after stop = %+v, want pg_replication_slots' %+v, inactive", got, want)
	}
	cp, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var systemID string
	if err := conn.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&systemID); err != nil {
		t.Fatal(err)
	}
	walEnd, _ := pglogrepl.ParseLSN(r.Server.WALFlushLSN)
	// The checkpoint holds what IDENTIFY_SYSTEM told the relay.
	if s := r.Server; !s.Exists || s.WALLevel != "logical" || s.SystemID != systemID || s.SystemID != r.Checkpoint.SystemID ||
		s.Timeline != r.Checkpoint.Timeline || s.Timeline != 1 || walEnd < cp.LSN {
		t.Errorf("server = %+v, want wal_level logical, system %s, and the checkpoint's identity %s/%d, WAL past its %s",
			s, systemID, r.Checkpoint.SystemID, r.Checkpoint.Timeline, r.Checkpoint.LSN)
	}
	if !r.Checkpoint.Exists || r.Checkpoint.Store != "kv:outboxd/"+slot || r.Checkpoint.LSN != cp.LSN.String() ||
		r.Checkpoint.SavedAt != cp.SavedAt.UTC().Format(time.RFC3339) || r.Checkpoint.Slot != slot {
		t.Errorf("checkpoint = %+v, want the store's %+v", r.Checkpoint, cp)
	}
	stream, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	si := stream.CachedInfo()
	if !r.Stream.Exists || r.Stream.Messages != events || r.Stream.Bytes != si.State.Bytes || r.Stream.Replicas != 1 ||
		r.Stream.DuplicateWindow != si.Config.Duplicates.String() || strings.Join(r.Stream.Subjects, ",") != strings.Join(si.Config.Subjects, ",") {
		t.Errorf("stream = %+v, want %d messages, %d bytes, 1 replica, window %s, subjects %v", r.Stream, events, si.State.Bytes, si.Config.Duplicates, si.Config.Subjects)
	}
	if codes := reportCodes(r); codes != "stream_single_replica,slot_inactive_retaining_wal" {
		t.Errorf("warnings after stop = %s, want stream_single_replica,slot_inactive_retaining_wal: %+v", codes, r.Warnings)
	}
	if codes := reportCodes(status()); codes != "stream_single_replica" {
		t.Errorf("warnings under the default --warn-retained-mib = %s, want stream_single_replica", codes)
	}

	// Something outside outboxd moves the slot past the checkpoint.
	if _, err := conn.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload)
		VALUES (gen_random_uuid(), 'order', 'lost', 'Created', '{}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", slot); err != nil {
		t.Fatal(err)
	}
	r = status()
	if codes := reportCodes(r); codes != "stream_single_replica,checkpoint_behind_slot+" {
		t.Errorf("warnings after the slot was advanced = %s, want stream_single_replica,checkpoint_behind_slot+", codes)
	}
	if codes := reportCodes(status("--allow-gap")); codes != "stream_single_replica,checkpoint_behind_slot" {
		t.Errorf("warnings with --allow-gap = %s, want checkpoint_behind_slot not blocking run", codes)
	}

	// The table for people shows the same.
	out, _, err := execute(t, newRootCommand(), args, nil)
	if err == nil || err.Error() != errStatusBlocks {
		t.Errorf("status = %v, want %q", err, errStatusBlocks)
	}
	t.Logf("outboxd status:\n%s", out)
	words := strings.Join(strings.Fields(out), " ") // the columns' widths aside
	for _, want := range []string{"postgresql server wal_level logical system " + r.Server.SystemID + " (timeline 1) WAL flushed to ",
		"slot " + slot + " plugin pgoutput (logical slot", "active no (no process streams from it)", "confirmed_flush_lsn " + r.Slot.ConfirmedFlushLSN,
		"publication outboxd publishes inserts yes tables \"public\".\"outbox\"",
		"stream OUTBOX subjects outbox.>", "messages " + strconv.Itoa(events), "replicas 1", "duplicate window 2m0s",
		"checkpoint kv:outboxd/" + slot + " lsn " + r.Checkpoint.LSN,
		"blocking outboxd run: 1 - [checkpoint_behind_slot]", "warnings: 1 - [stream_single_replica]"} {
		if !strings.Contains(words, want) {
			t.Errorf("status table lacks %q:\n%s", want, out)
		}
	}

	// The slot dropped while the checkpoint stays: run refuses, and status
	// says so as run does.
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
		t.Fatal(err)
	}
	r = status()
	var missing relay.StatusWarning
	for _, w := range r.Warnings {
		if w.Code == "slot_missing" {
			missing = w
		}
	}
	runErr := runRelay(ctx, cfg, zerolog.Nop())
	const refusal = "the slot was dropped, so events committed since then are not in WAL any more"
	if runErr == nil || !strings.Contains(runErr.Error(), refusal) {
		t.Fatalf("run without the slot = %v, want it to refuse: %s", runErr, refusal)
	}
	runSaid, _, _ := strings.Cut(runErr.Error(), refusal)
	if !missing.BlocksRun || !strings.HasPrefix(missing.Message, runSaid+refusal) || !strings.Contains(missing.Message, "outboxd run refuses to start") ||
		!strings.Contains(missing.Message, "nats kv del outboxd "+slot) {
		t.Errorf("slot_missing = %+v, want it blocking, starting as run's refusal %q, naming how to delete the checkpoint", missing, runErr)
	}
}

// reportCodes is warningCodes of a parsed report.
func reportCodes(r relay.StatusReport) string {
	var codes []string
	for _, w := range r.Warnings {
		if w.BlocksRun {
			w.Code += "+"
		}
		codes = append(codes, w.Code)
	}
	return strings.Join(codes, ",")
}
