// Package natstest starts in-process NATS servers with JetStream for tests.
//
// A Server keeps its port and store folder across Shutdown and Restart, so a
// test can simulate a broker outage and check that stream data survives it.
package natstest
