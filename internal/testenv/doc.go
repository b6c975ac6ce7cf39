// Package testenv is the parent of what tests and benchmarks run against:
// private PostgreSQL clusters (pgcluster, pgtest), NATS servers and
// clusters (natstest), a test certificate authority (testca), the stream
// checker that counts lost, duplicated and reordered events (checker), a
// headless browser for the status page (browser), CPU clocks for
// benchmarks (cpuclock), the fuzz corpus capture (fuzzcapture), and the
// shared wait and buffer helpers (testsync). Nothing here is linked into
// the outboxd binary.
package testenv
