// Package natstest starts in-process NATS servers with JetStream for tests.
//
// A Server keeps its port and store folder across Shutdown and Restart, so a
// test can simulate a broker outage and check that stream data survives it.
// A Cluster is three (or n) such servers routed together, for failover
// tests: KillLeader shuts down the node that leads a stream, and a Restart
// of that node brings it back to catch up.
package natstest
