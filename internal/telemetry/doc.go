// Package telemetry is what outboxd shows its operators on --metrics-addr:
// Prometheus metrics (in a registry of its own, never the global one),
// liveness and readiness (/healthz, /readyz), and a Snapshot of the
// current state for the status page.
//
// Counters and the latency histogram are fed by the publisher through the
// sink.Observer methods of [Metrics]; the positions and the in-flight count
// are read from the running session when scraped; the slot's lag and
// retained WAL are set by a probe on a normal PostgreSQL connection.
package telemetry
