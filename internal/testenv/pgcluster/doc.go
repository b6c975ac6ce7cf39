// Package pgcluster starts a private, throwaway PostgreSQL cluster: initdb in
// a folder of its own, wal_level=logical, listening only on a loopback port.
//
// With Options.TLS the server has ssl = on and a certificate signed by a CA
// made in memory for the cluster (CAFile), for sslmode=verify-full tests;
// TLSOptions.Require also makes pg_hba.conf accept TCP only over TLS.
//
// Tests use it through package pgtest; the `outboxd demo` command uses it
// directly. The server runs as a child process of the caller: it is stopped
// by Stop or Close, and it also receives SIGQUIT (immediate shutdown) if the
// caller dies, so a killed test binary does not leave a postmaster behind.
//
// PostgreSQL refuses to run as root. When the caller is root, initdb and
// postgres run as the "postgres" system user if it exists, else as "nobody",
// and the cluster folder is handed to that user.
package pgcluster
