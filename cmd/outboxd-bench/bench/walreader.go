package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// WALReader is the latency limit of the steady-state runs: a bare pgoutput
// client that reads a slot and does nothing but note, for each
// transaction, how long after its commit the Commit message arrived. No
// relay reading the same walsender can deliver sooner, so when it shows a
// tail, the tail is PostgreSQL's (or the machine's), not outboxd's.
type WALReader struct {
	PGURL, Slot, Publication string
	// Out receives the result as JSON (readerResult) when Run returns.
	Out string
	// Samples, if set, receives one line per transaction: the commit time
	// (Unix microseconds) and the latency (microseconds), to see when a
	// tail happened.
	Samples string
}

// readerResult is what the reader writes to Out.
type readerResult struct {
	Transactions int         `json:"transactions"`
	Latency      percentiles `json:"latency"`
}

// readerStatusEvery is how often the reader confirms what it read.
const readerStatusEvery = time.Second

// Run reads until ctx is done, then writes the result.
func (r WALReader) Run(ctx context.Context) error {
	conn, err := startReplication(ctx, r.PGURL, r.Slot, r.Publication)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var samples []time.Duration
	var commits []time.Time
	err = r.receive(ctx, conn, func(committed, arrived time.Time) {
		samples = append(samples, arrived.Sub(committed))
		commits = append(commits, committed)
	})
	if ctx.Err() == nil {
		return err
	}
	return r.write(samples, commits)
}

// startReplication opens a replication connection to pgURL and starts
// streaming slot with pgoutput (protocol version 1) for publication.
func startReplication(ctx context.Context, pgURL, slot, publication string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(pgURL)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect for replication: %w", err)
	}
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names '" + publication + "'"},
	})
	if err != nil {
		conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the start's error is the one to report
		return nil, fmt.Errorf("start replication on %s: %w", slot, err)
	}
	return conn, nil
}

// receive reads the stream until ctx is done, calling commit for each
// Commit message with its commit time and the time it arrived.
func (r WALReader) receive(ctx context.Context, conn *pgconn.PgConn, commit func(committed, arrived time.Time)) error {
	return receiveWAL(ctx, conn, func(_ pglogrepl.LSN, wal []byte, arrived time.Time) (pglogrepl.LSN, error) {
		if wal[0] != 'C' {
			return 0, nil
		}
		m, err := pglogrepl.Parse(wal)
		if err != nil {
			return 0, err
		}
		c := m.(*pglogrepl.CommitMessage)
		commit(c.CommitTime, arrived)
		return c.TransactionEndLSN, nil
	})
}

// receiveWAL reads a replication stream until ctx is done, handing each
// pgoutput message to data with its WAL position and the time it arrived.
// data returns, for a Commit it is done with, the position that may be
// confirmed (0 otherwise); it is confirmed at the next status update,
// every readerStatusEvery. A keepalive's WAL end is confirmed between
// transactions.
func receiveWAL(ctx context.Context, conn *pgconn.PgConn, data func(walStart pglogrepl.LSN, wal []byte, arrived time.Time) (pglogrepl.LSN, error)) error {
	var read pglogrepl.LSN // confirmed at the next status update
	open := false          // between a Begin and its Commit
	nextStatus := time.Now()
	for ctx.Err() == nil {
		if time.Now().After(nextStatus) {
			err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
				WALWritePosition: read, WALFlushPosition: read, WALApplyPosition: read})
			if err != nil {
				return err
			}
			nextStatus = time.Now().Add(readerStatusEvery)
		}
		rctx, cancel := context.WithDeadline(ctx, nextStatus)
		raw, err := conn.ReceiveMessage(rctx)
		arrived := time.Now()
		cancel()
		if pgconn.Timeout(err) {
			continue
		}
		if err != nil {
			return err
		}
		cd, ok := raw.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 {
			continue
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				return err
			}
			if !open {
				read = max(read, ka.ServerWALEnd) // nothing unread before it
			}
			if ka.ReplyRequested {
				nextStatus = time.Now()
			}
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				return err
			}
			if len(xld.WALData) == 0 {
				continue
			}
			switch xld.WALData[0] {
			case 'B':
				open = true
			case 'C':
				open = false
			}
			done, err := data(xld.WALStart, xld.WALData, arrived)
			if err != nil {
				return err
			}
			read = max(read, done)
		}
	}
	return nil
}

func (r WALReader) write(samples []time.Duration, commits []time.Time) error {
	res := readerResult{Transactions: len(samples), Latency: percentilesOf(samples)}
	if r.Samples != "" {
		f, err := os.Create(r.Samples)
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		for i, d := range samples {
			fmt.Fprintf(w, "%d %d\n", commits[i].UnixMicro(), d.Microseconds())
		}
		if err := errors.Join(w.Flush(), f.Close()); err != nil {
			return err
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(r.Out, b, 0o644)
}
