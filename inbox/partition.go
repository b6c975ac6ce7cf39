package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Transform returns the subject transform that gives each event's subject
// a last token, its partition: a hash of the Key wildcards modulo
// Partitions, computed by the server when it stores the message. The
// operator sets it on the stream (StreamConfig.SubjectTransform), or on
// the source of a stream this consumer owns (StreamSource.SubjectTransforms).
// For Subject outbox.*.*, Key 1,2 and 8 partitions:
//
//	source      outbox.*.*
//	destination outbox.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(8,1,2)}}
//
// so outbox.order.42 is stored as outbox.order.42.5, say, and every event
// of order 42 lands in partition 5.
func (c Config) Transform() jetstream.SubjectTransformConfig {
	c = c.withDefaults()
	var dest []string
	wildcard := 0
	for _, tok := range strings.Split(c.Subject, ".") {
		if tok == "*" {
			wildcard++
			tok = fmt.Sprintf("{{wildcard(%d)}}", wildcard)
		}
		dest = append(dest, tok)
	}
	keys := make([]string, len(c.Key))
	for i, k := range c.Key {
		keys[i] = strconv.Itoa(k)
	}
	dest = append(dest, fmt.Sprintf("{{partition(%d,%s)}}", c.Partitions, strings.Join(keys, ",")))
	return jetstream.SubjectTransformConfig{Source: c.Subject, Destination: strings.Join(dest, ".")}
}

// ConsumerConfig returns the durable consumer of partition p that reads
// the subjects filter (see New). MaxAckPending 1 is what keeps each
// aggregate's order: the server delivers a partition's next message only
// once the previous one is acked or terminated, whichever process holds
// it, across crashes and redeliveries. MaxDeliver is unlimited because
// the worker bounds the attempts itself and dead-letters the message:
// the server's own limit would drop it with only an advisory.
func (c Config) ConsumerConfig(p int, filter string) jetstream.ConsumerConfig {
	c = c.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:       c.Durable(p),
		Description:   fmt.Sprintf("inbox %s, partition %d of %d", c.Name, p, c.Partitions),
		FilterSubject: filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxAckPending: 1,
		MaxDeliver:    -1,
	}
}

// filters returns each partition's filter subject for a stream configured
// as cfg, or an error that says how to configure it.
func (c Config) filters(cfg jetstream.StreamConfig) ([]string, error) {
	want := c.Transform()
	found, ok := findTransform(cfg, c.Subject)
	switch {
	case !ok && c.Partitions == 1:
		return []string{c.Subject}, nil
	case !ok:
		return nil, &ConfigError{"Stream", strconv.Quote(cfg.Name),
			fmt.Sprintf("has no subject transform from %q that adds the partition token %d partitions need", c.Subject, c.Partitions),
			fmt.Sprintf("nats stream edit %s --transform-source '%s' --transform-destination '%s' (or source the stream into one of this consumer's own with that transform; see docs/inbox.md)",
				cfg.Name, want.Source, want.Destination)}
	case sameTransform(found, want):
	case c.Partitions == 1 && isPartitionTransform(found, want):
		// One worker reads every partition in stream order: a total order
		// keeps each aggregate's order too.
		return []string{c.Subject + ".*"}, nil
	default:
		return nil, &ConfigError{"Partitions", strconv.Itoa(c.Partitions),
			fmt.Sprintf("does not match stream %s's transform to %q (want %q)", cfg.Name, found.Destination, want.Destination),
			"set Partitions and Key to those of the stream's {{partition(N,keys)}}, or change the stream's transform while no consumer has messages pending"}
	}
	filters := make([]string, c.Partitions)
	for p := range filters {
		filters[p] = c.Subject + "." + strconv.Itoa(p)
	}
	return filters, nil
}

// findTransform returns the transform from source that cfg applies to
// what it stores: its own, or one of a source's.
func findTransform(cfg jetstream.StreamConfig, source string) (jetstream.SubjectTransformConfig, bool) {
	if t := cfg.SubjectTransform; t != nil && t.Source == source {
		return *t, true
	}
	for _, src := range cfg.Sources {
		if src == nil {
			continue
		}
		for _, t := range src.SubjectTransforms {
			if t.Source == source {
				return t, true
			}
		}
	}
	return jetstream.SubjectTransformConfig{}, false
}

func sameTransform(a, b jetstream.SubjectTransformConfig) bool {
	return a.Source == b.Source && stripSpace(a.Destination) == stripSpace(b.Destination)
}

// isPartitionTransform reports whether got is want with another
// partition count or key: the same subject plus a partition token.
func isPartitionTransform(got, want jetstream.SubjectTransformConfig) bool {
	prefix := want.Destination[:strings.LastIndex(want.Destination, ".")+1]
	return strings.HasPrefix(stripSpace(got.Destination), prefix+"{{partition(")
}

func stripSpace(s string) string { return strings.Join(strings.Fields(s), "") }

// setUpConsumers creates or updates the durable consumer of each
// partition. It refuses to move an existing one to another filter: its
// position was kept for the old layout, and messages between that position
// and the new filter's would be skipped or reordered.
func (c Config) setUpConsumers(ctx context.Context, js jetstream.JetStream, filters []string) ([]jetstream.Consumer, error) {
	consumers := make([]jetstream.Consumer, len(filters))
	for p, filter := range filters {
		want := c.ConsumerConfig(p, filter)
		old, err := js.Consumer(ctx, c.Stream, want.Durable)
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
		case err != nil:
			return nil, fmt.Errorf("inbox: read consumer %s of stream %s: %w", want.Durable, c.Stream, err)
		case old.CachedInfo().Config.FilterSubject != filter:
			return nil, &ConfigError{"Partitions", strconv.Itoa(c.Partitions),
				fmt.Sprintf("gives durable consumer %s the filter %q, but it has %q from another layout", want.Durable, filter, old.CachedInfo().Config.FilterSubject),
				"keep Subject and Partitions as they were, or let the old consumers catch up, stop them and delete them (nats consumer rm) before starting with the new layout; see docs/inbox.md"}
		}
		consumers[p], err = js.CreateOrUpdateConsumer(ctx, c.Stream, want)
		if err != nil {
			return nil, fmt.Errorf("inbox: create consumer %s on stream %s (filter %s): %w", want.Durable, c.Stream, filter, err)
		}
	}
	return consumers, nil
}
