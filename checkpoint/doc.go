// Package checkpoint decides how far outboxd may tell PostgreSQL that the WAL
// is consumed, and remembers it across restarts.
//
// Three parts, from the hot path outwards:
//
//   - [Tracker] follows every message from the moment it enters the pipeline
//     until JetStream acknowledges it, and computes the safe LSN: the end LSN
//     of the newest transaction whose messages, and every earlier
//     transaction's, are all acknowledged. It does no I/O.
//   - [Store] persists a [Checkpoint] (the safe LSN plus the identity of the
//     database, timeline and slot it belongs to) in a NATS KV bucket
//     ([KVStore]) or a local file ([FileStore]); [ParseLocation] reads the
//     user's "kv:BUCKET" or "file:PATH".
//   - [Checkpointer] saves the tracker's safe LSN on a timer and publishes the
//     newest saved one as [Checkpointer.Durable].
//
// The order of durability is PubAck, then checkpoint saved, then flush LSN
// sent to PostgreSQL (docs/design.md, invariant 5): the replication goroutine must
// confirm Durable, never Safe, so the slot's confirmed_flush_lsn is never
// ahead of the stored checkpoint. Positions are always transaction end LSNs
// (invariant 7), never the LSN of a row.
//
// The package starts no goroutines of its own: the caller runs
// [Checkpointer.Run].
package checkpoint
