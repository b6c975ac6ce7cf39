// Package migrations holds outboxd's SQL migrations, embedded in the binary,
// and applies them in version order. Each applied version is recorded in the
// table outboxd_schema_migrations, so running them again does nothing.
package migrations
