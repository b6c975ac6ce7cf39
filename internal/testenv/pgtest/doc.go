// Package pgtest gives tests a real PostgreSQL server with
// wal_level=logical.
//
// Where it comes from, in order:
//
//  1. OUTBOXD_TEST_PG_URL, if set: an existing server (its wal_level must be
//     logical, and its user must be allowed to create databases);
//  2. a private cluster made with initdb (package pgcluster), from the
//     binaries on PATH or under /usr/lib/postgresql/*/bin;
//  3. if there are no such binaries and a Docker engine answers, the
//     postgres:16 image started through dockertest.
//
// If none works the test fails with what to install; it is never skipped.
//
// Shared gives every test of a package one server and NewDatabase gives each
// test its own database on it. A package that uses Shared stops the server
// from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// Tests that stop and restart the server (fault tests) use Start, which
// gives them a server of their own.
package pgtest
