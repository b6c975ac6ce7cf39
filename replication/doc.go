// Package replication owns outboxd's logical replication connection to
// PostgreSQL: it checks the server, the slot and the publication before
// streaming (Preflight), starts pgoutput streaming from a given LSN, and runs
// the receive loop (Stream.Run).
//
// One goroutine owns the connection (docs/design.md invariant 2): Stream.Run
// both receives and sends standby status updates. Other goroutines only
// report the durable position through the function passed to Stream.Start,
// which Run reads each time it sends an update. After Run returns,
// ownership passes back to the caller, who sends the final update with
// Stream.Close.
package replication
