// Package e2e holds outboxd's end-to-end tests. They build the real outboxd
// binary, run it against a private PostgreSQL cluster and an in-process NATS
// server with JetStream (never mocks), and check the stream with the checker:
// nothing lost, nothing unexpected, nothing twice, commit order kept.
package e2e
