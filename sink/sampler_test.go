package sink

import (
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/internal/testenv/natstest"
)

// recordingSampler keeps every sample it is offered.
type recordingSampler struct {
	mu   sync.Mutex
	seqs map[uint64]string // stream sequence -> Nats-Msg-Id
}

func (s *recordingSampler) Stored(msg *nats.Msg, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs[seq] = msg.Header.Get(jetstream.MsgIDHeader)
}

// TestSamplerSequences: in every mode the sampler is offered messages with
// the stream sequence the acknowledgement named, and the stream holds each
// of those messages at that sequence.
func TestSamplerSequences(t *testing.T) {
	for _, tc := range []struct {
		name         string
		fast, atomic bool
	}{{"async", false, false}, {"fast", true, false}, {"atomic", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv := natstest.Start(t)
			nc, js := newJetStream(t, srv)
			tmpl := testTemplate(t, defaultTemplate)
			setupStream(t, js, "OUTBOX", tmpl)
			items := txItems(t, 1, 40, 1, 1, 200, 3)
			sampler := &recordingSampler{seqs: make(map[uint64]string)}
			p := newTestPublisher(t, js, nc.MaxPayload(), Config{Stream: "OUTBOX", Subject: tmpl,
				Fast: tc.fast, Atomic: tc.atomic, Sampler: sampler})
			if err := run(ctx, p, items, newAcker(), nil); err != nil {
				t.Fatal(err)
			}
			if len(sampler.seqs) == 0 {
				t.Fatal("no sample offered")
			}
			stored := readStream(t, srv, "OUTBOX")
			for seq, id := range sampler.seqs {
				if seq == 0 || seq > uint64(len(stored)) || stored[seq-1].Header.Get(jetstream.MsgIDHeader) != id {
					t.Errorf("sample %s at stream sequence %d: the stream (%d messages) does not hold it there", id, seq, len(stored))
				}
			}
			t.Logf("%d samples offered for %d messages", len(sampler.seqs), len(items))
		})
	}
}
