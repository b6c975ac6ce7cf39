package relay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/internal/testenv/natstest"
)

// TestStreamCheck samples an acknowledged message, does to the stream what
// each case says, and checks the result counted an interval later: the
// message still there, deleted from inside the stream, removed by a purge
// (the stream's policy, not a loss), replaced by another at its sequence
// (a stream that lost acknowledged messages and went on), or unreadable.
func TestStreamCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(ctx context.Context, t *testing.T, js jetstream.JetStream, seq uint64)
		want   string
	}{
		{"kept", func(context.Context, *testing.T, jetstream.JetStream, uint64) {}, telemetry.CheckOK},
		{"deleted", func(ctx context.Context, t *testing.T, js jetstream.JetStream, seq uint64) {
			s, err := js.Stream(ctx, "OUTBOX")
			if err == nil {
				err = s.DeleteMsg(ctx, seq)
			}
			if err != nil {
				t.Fatal(err)
			}
		}, telemetry.CheckMissing},
		{"purged", func(ctx context.Context, t *testing.T, js jetstream.JetStream, _ uint64) {
			s, err := js.Stream(ctx, "OUTBOX")
			if err == nil {
				err = s.Purge(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
		}, telemetry.CheckExpired},
		{"replaced", func(ctx context.Context, t *testing.T, js jetstream.JetStream, seq uint64) {
			if err := js.DeleteStream(ctx, "OUTBOX"); err != nil {
				t.Fatal(err)
			}
			createCheckStream(ctx, t, js)
			publishCheckMessages(ctx, t, js, "other", int(seq))
		}, telemetry.CheckReplaced},
		{"stream gone", func(ctx context.Context, t *testing.T, js jetstream.JetStream, _ uint64) {
			if err := js.DeleteStream(ctx, "OUTBOX"); err != nil {
				t.Fatal(err)
			}
		}, telemetry.CheckError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			js := natstest.Start(t).JetStream(t)
			createCheckStream(ctx, t, js)
			msgs, seqs := publishCheckMessages(ctx, t, js, "event", 5)
			metrics := telemetry.NewMetrics("OUTBOX")
			cfg := DefaultConfig()
			c := newStreamCheck(js, cfg, metrics, zerolog.Nop())

			c.Stored(msgs[0], seqs[0]) // not due: no sample
			c.due.Store(true)
			c.Stored(msgs[2], seqs[2])
			c.Stored(msgs[3], seqs[3]) // one sample per interval
			c.checkDue(ctx, time.Now().Add(cfg.StreamCheck/2))
			if got := checkCounts(t, metrics); got != nil {
				t.Fatalf("a sample younger than the interval was checked: %v", got)
			}
			tc.damage(ctx, t, js, seqs[2])
			c.checkDue(ctx, time.Now().Add(cfg.StreamCheck))
			if got, want := checkCounts(t, metrics), map[string]float64{tc.want: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("outboxd_stream_checks_total = %v, want %v", got, want)
			}
		})
	}
}

func TestVerifySince(t *testing.T) {
	if got, want := verifySince("2026-12-06T14:00:30.123456789Z"), "2026-12-06T13:59:30Z"; got != want {
		t.Errorf("verifySince = %q, want %q: a minute before the commit", got, want)
	}
	if got := verifySince("garbled"); got != "garbled" {
		t.Errorf("verifySince(garbled) = %q, want it as it came", got)
	}
}

// createCheckStream creates stream OUTBOX capturing outbox.>.
func createCheckStream(ctx context.Context, t *testing.T, js jetstream.JetStream) {
	t.Helper()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}}); err != nil {
		t.Fatal(err)
	}
}

// publishCheckMessages publishes n messages with ids prefix-1 to prefix-n
// and returns them with the sequences JetStream acknowledged.
func publishCheckMessages(ctx context.Context, t *testing.T, js jetstream.JetStream, prefix string, n int) ([]*nats.Msg, []uint64) {
	t.Helper()
	var msgs []*nats.Msg
	var seqs []uint64
	for i := 1; i <= n; i++ {
		msg := nats.NewMsg("outbox.order.created")
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", prefix, i))
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		msgs, seqs = append(msgs, msg), append(seqs, ack.Sequence)
	}
	return msgs, seqs
}

// checkCounts returns outboxd_stream_checks_total's non-zero results.
func checkCounts(t *testing.T, m *telemetry.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]float64
	for _, f := range families {
		if f.GetName() != "outboxd_stream_checks_total" {
			continue
		}
		for _, metric := range f.GetMetric() {
			if v := metric.GetCounter().GetValue(); v != 0 {
				if out == nil {
					out = make(map[string]float64)
				}
				out[metric.GetLabel()[0].GetValue()] = v
			}
		}
	}
	return out
}
