package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgconn"
)

// StandbyOptions configures StartStandby.
type StandbyOptions struct {
	// Slot is the physical replication slot, created on the primary, that
	// the standby streams from (primary_slot_name). It is also the
	// standby's application_name, for synchronous_standby_names.
	Slot string
	// Database is the database named in primary_conninfo, which the slot
	// sync worker of PostgreSQL 17+ connects to. Default postgres.
	Database string
	// ExtraConf adds or overrides the standby's settings
	// (sync_replication_slots, hot_standby_feedback, ...).
	ExtraConf map[string]string
}

// StartStandby makes a streaming physical standby of the running cluster
// c: it creates the physical slot on c, shuts c down cleanly, copies its
// data folder, starts c again, and starts the copy as a hot standby on a
// port of its own, returning once it accepts connections. (A copy of a
// cleanly stopped primary is a valid base backup, and needs no
// pg_basebackup of the same major.) The copy has no replication slots of
// its own. Close stops the standby and removes its folder.
func (c *Cluster) StartStandby(ctx context.Context, o StandbyOptions) (_ *Cluster, err error) {
	if o.Slot == "" {
		return nil, errors.New("start standby: no physical slot name")
	}
	if o.Database == "" {
		o.Database = "postgres"
	}
	if err := c.exec(ctx, fmt.Sprintf("SELECT pg_create_physical_replication_slot('%s', true)", o.Slot)); err != nil {
		return nil, fmt.Errorf("start standby: create physical slot %q: %w", o.Slot, err)
	}
	sb := &Cluster{binDir: c.binDir, user: c.user, log: c.log, ownsDir: true}
	if sb.dir, err = os.MkdirTemp("", "pgstandby-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(sb.dir)
		}
	}()
	if err := c.user.own(sb.dir); err != nil {
		return nil, fmt.Errorf("prepare %s: %w", sb.dir, err)
	}
	if sb.port, err = freePort(); err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	if err := c.Stop("fast"); err != nil {
		return nil, err
	}
	copyErr := copyDataDir(c.dataDir(), sb.dataDir())
	if err := errors.Join(copyErr, c.Start(ctx)); err != nil {
		return nil, fmt.Errorf("start standby: %w", err)
	}
	if err := sb.makeStandby(c, o); err != nil {
		return nil, fmt.Errorf("start standby: %w", err)
	}
	if err := sb.Start(ctx); err != nil {
		return nil, err
	}
	return sb, nil
}

// copyDataDir copies a stopped cluster's data folder with owners and modes
// (cp -a: PGDATA belongs to the server's user and must keep mode 0700),
// leaving out its replication slots.
func copyDataDir(from, to string) error {
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("copy %s to %s: %w: %s", from, to, err, out)
	}
	slots, err := filepath.Glob(filepath.Join(to, "pg_replslot", "*"))
	for _, slot := range slots {
		err = errors.Join(err, os.RemoveAll(slot))
	}
	return err
}

// makeStandby turns the copied data folder into primary's standby: its own
// port and socket, primary_conninfo and primary_slot_name, and
// standby.signal.
func (c *Cluster) makeStandby(primary *Cluster, o StandbyOptions) error {
	conf := map[string]string{
		"primary_conninfo": fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s application_name=%s",
			primary.port, o.Database, o.Slot),
		"primary_slot_name": o.Slot,
		"hot_standby":       "on",
	}
	for k, v := range o.ExtraConf {
		conf[k] = v
	}
	if err := c.writeConf(conf); err != nil {
		return fmt.Errorf("write postgresql.conf: %w", err)
	}
	signal := filepath.Join(c.dataDir(), "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return err
	}
	if c.user != nil {
		return os.Chown(signal, int(c.user.uid), int(c.user.gid))
	}
	return nil
}

// Promote makes a standby the primary (pg_promote) and returns once it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	promoted, err := c.query(ctx, "SELECT pg_promote(wait => true, wait_seconds => 60)")
	if err == nil && promoted != "t" {
		err = errors.New("not promoted within 60 s")
	}
	if err != nil {
		return fmt.Errorf("promote the standby on port %d: %w", c.port, err)
	}
	return nil
}

// exec runs sql as the superuser in database postgres.
func (c *Cluster) exec(ctx context.Context, sql string) error {
	_, err := c.query(ctx, sql)
	return err
}

// query runs sql as the superuser in database postgres and returns the
// first column of its first row, in text form ("" when there is none).
func (c *Cluster) query(ctx context.Context, sql string) (string, error) {
	conn, err := pgconn.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	results, err := conn.Exec(ctx, sql).ReadAll()
	if err != nil || len(results) == 0 || len(results[0].Rows) == 0 || len(results[0].Rows[0]) == 0 {
		return "", err
	}
	return string(results[0].Rows[0][0]), nil
}
