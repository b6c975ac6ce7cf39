// Package statuspage serves outboxd's live status page: one HTML file
// embedded in the binary (no build step, no CDN) that polls a small JSON
// endpoint every second and draws the publish rate and the replication lag
// of the last 15 minutes on <canvas>. A Recorder samples the state every
// second into a fixed ring, so the history costs the same memory however
// long outboxd runs.
package statuspage
