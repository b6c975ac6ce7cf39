package e2e

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// composeFile is the example a newcomer runs first.
const composeFile = "../../examples/compose/compose.yaml"

// composeService is the part of a compose service the test runs.
type composeService struct {
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
}

// TestComposeExample runs what examples/compose/compose.yaml runs, against
// this test's PostgreSQL and NATS: outboxd migrate and outboxd run with the
// file's commands and environment (only the server addresses, the slot and
// the metrics port differ: the test's servers are shared and local), then
// the producer's SQL once outboxd streams; the stream must hold its events.
func TestComposeExample(t *testing.T) {
	data, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	for _, name := range []string{"postgres", "nats", "migrate", "outboxd", "producer", "consumer"} {
		if _, ok := compose.Services[name]; !ok {
			t.Fatalf("%s has no service %q", composeFile, name)
		}
	}
	if pg := strings.Join(compose.Services["postgres"].Command, " "); !strings.Contains(pg, "wal_level=logical") {
		t.Errorf("the postgres service runs %q, without wal_level=logical", pg)
	}
	e := newEnv(t, pgtest.Shared(t), false)
	local := map[string]string{
		"OUTBOXD_PG_URL": e.dsn, "OUTBOXD_NATS_URL": e.url(), "OUTBOXD_METRICS_ADDR": "127.0.0.1:0",
	}
	environ := func(service string) []string {
		var env []string
		for k, v := range compose.Services[service].Environment {
			if l, ok := local[k]; ok {
				v = l
			}
			env = append(env, k+"="+v)
		}
		if service == "outboxd" {
			env = append(env, "OUTBOXD_SLOT="+e.slot) // slots are per cluster, and the cluster is shared
		}
		return env
	}

	migrate := compose.Services["migrate"]
	if !slices.Equal(migrate.Command, []string{"migrate"}) {
		t.Fatalf("the migrate service runs %q, the test knows outboxd migrate", migrate.Command)
	}
	m := e.startWithEnv(environ("migrate"), migrate.Command...)
	if code := m.wait(time.Minute); code != 0 {
		t.Fatalf("outboxd migrate exited %d:\n%s", code, m.output.String())
	}

	run := compose.Services["outboxd"]
	if !slices.Equal(run.Command, []string{"run"}) {
		t.Fatalf("the outboxd service runs %q, the test knows outboxd run", run.Command)
	}
	p := e.startWithEnv(environ("outboxd"), run.Command...)
	defer p.stopCleanly()
	e.waitStreaming(p)

	sql := compose.Services["producer"].Environment["EVENTS_SQL"]
	if !strings.Contains(compose.Services["producer"].Command[2], "$$EVENTS_SQL") {
		t.Fatalf("the producer does not run $EVENTS_SQL: %q", compose.Services["producer"].Command)
	}
	want := strings.Count(sql, "outbox_emit(")
	if want == 0 {
		t.Fatalf("the producer's EVENTS_SQL writes no event: %q", sql)
	}
	if _, err := e.connect().Exec(context.Background(), sql); err != nil {
		t.Fatalf("the producer's SQL: %v", err)
	}
	msgs := e.readStream(e.js(), want, 30*time.Second)
	if len(msgs) != want {
		t.Fatalf("the stream holds %d events, want the producer's %d", len(msgs), want)
	}
	consumer := strings.Join(compose.Services["consumer"].Command, " ")
	for _, s := range []string{"--stream " + streamName, "outbox.>"} {
		if !strings.Contains(consumer, s) {
			t.Errorf("the consumer runs %q, which does not read %q", consumer, s)
		}
	}
}
