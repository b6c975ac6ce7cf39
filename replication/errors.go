package replication

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrSlotActive is returned when another process holds the replication slot
// (SQLSTATE 55006). Retrying later can succeed: it is how a standby waits.
var ErrSlotActive = errors.New("replication slot is active for another process")

// PreflightError is a problem with the server, slot or publication that
// retrying cannot fix. It names the object, what is wrong and the fix.
type PreflightError struct {
	Object  string // e.g. `publication "outboxd"`
	Problem string
	Fix     string
	// Err, when set, is what errors.Is matches (ErrSlotInvalidated).
	Err error
}

func (e *PreflightError) Error() string {
	return fmt.Sprintf("%s: %s; fix: %s", e.Object, e.Problem, e.Fix)
}

func (e *PreflightError) Unwrap() error { return e.Err }

// ErrSlotInvalidated is matched by Preflight's error for a slot PostgreSQL
// invalidated (wal_status lost): no slot can decode the events since its
// position any more, but their rows may still be in the outbox table.
var ErrSlotInvalidated = errors.New("replication slot invalidated")

// MissingPublication reports whether err is the walsender's "publication
// ... does not exist" (SQLSTATE 42704): the publication was dropped while
// the slot still had WAL from before to decode.
func MissingPublication(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42704" && strings.HasPrefix(pgErr.Message, "publication ")
}

// Permanent reports whether err, returned by this package, cannot be fixed
// by reconnecting: bad configuration, missing objects, refused credentials.
// Connection losses, server restarts and an active slot are not permanent.
func Permanent(err error) bool {
	var pe *PreflightError
	if errors.As(err, &pe) {
		return true
	}
	// A certificate the client refuses (unknown CA, wrong host name,
	// expired) stays refused: reconnecting cannot fix it.
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) < 2 {
		return false // no SQLSTATE class to judge by: like any other error
	}
	switch pgErr.Code {
	case "55006": // object_in_use: the slot is held by another process
		return false
	case "57P01", "57P02", "57P03", "53300": // shutdown, crash, starting up, too many connections
		return false
	}
	switch pgErr.Code[:2] {
	case "08", "53", "57", "58": // connection, resources, operator intervention, system
		return false
	}
	// 28 (auth), 3D (no database), 42 (undefined object, e.g. publication
	// dropped), 55 (prerequisite state, e.g. wal_level), and the rest.
	return true
}

// classify turns a server error into this package's vocabulary.
func classify(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" {
		return fmt.Errorf("%s: %w: %s", op, ErrSlotActive, pgErr.Message)
	}
	return fmt.Errorf("%s: %w", op, err)
}
