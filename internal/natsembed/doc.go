// Package natsembed runs a NATS server with JetStream inside the calling
// process, for `outboxd demo` and, through package natstest, for tests.
//
// It installs no signal handlers and logs only through the zerolog.Logger it
// is given, so the caller keeps control of the process.
package natsembed
