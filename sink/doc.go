// Package sink publishes outbox events to a NATS JetStream stream.
//
// A Template turns an event into its subject. A Publisher sends events in the
// order it receives them with pipelined asynchronous publishes, keeps at most
// Config.MaxInFlight unacknowledged, and reports each acknowledgement in order.
// When a publish fails it stops, waits for everything in flight, and
// republishes from the first unacknowledged message; the Nats-Msg-Id header
// (the event id) lets JetStream drop the repeats (docs/design.md invariant 3).
package sink
