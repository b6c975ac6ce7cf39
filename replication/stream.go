package replication

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Message is one item of the replication stream, in the order the server
// sent it: a pgoutput message (Data set) or a keepalive (Data nil).
type Message struct {
	// WALStart is the WAL position of the pgoutput message.
	WALStart pglogrepl.LSN
	// ServerWALEnd is the server's position when it sent the message. For a
	// keepalive it may be confirmed when nothing is open or in flight.
	ServerWALEnd pglogrepl.LSN
	// Data is a private copy of the pgoutput bytes; nil for a keepalive.
	// Messages of one batch may share a buffer: never write to Data.
	Data []byte
}

// Stream is an open replication connection. Its methods must be called from
// one goroutine at a time; Run is the receive loop.
type Stream struct {
	cfg      Config
	conn     *pgconn.PgConn
	socket   *lingerConn // under conn: batches reads once streaming
	system   pglogrepl.IdentifySystemResult
	received pglogrepl.LSN // end of the newest WAL data received
	// serverWAL is the furthest the server said its WAL reaches (at
	// IDENTIFY_SYSTEM, then in every message): no status update confirms
	// more, whatever durable says.
	serverWAL pglogrepl.LSN
	// durable returns the LSN that may be confirmed as flushed: everything
	// before it is acknowledged by JetStream and saved in the checkpoint.
	// Nil until Start.
	durable func() pglogrepl.LSN
	// shownReceived and shownConfirmed publish received and the last flush
	// position sent, for other goroutines (metrics) to read.
	shownReceived, shownConfirmed atomic.Uint64
}

// Connect opens a replication connection (replication=database) and reads
// the server's identity.
func Connect(ctx context.Context, cfg Config) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pgcfg, err := decoderSettings(cfg.ConnString, "outboxd")
	if err != nil {
		return nil, err
	}
	pgcfg.RuntimeParams["replication"] = "database"
	// The socket the session reads from, to batch its reads once it
	// streams (it may be under TLS, which pgconn.Conn would return).
	var socket *lingerConn
	dial := pgcfg.DialFunc
	pgcfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		socket = newLingerConn(c, cfg.ReadLinger)
		return socket, nil
	}
	conn, err := pgconn.ConnectConfig(ctx, pgcfg)
	if err != nil {
		return nil, fmt.Errorf("connect for replication: %w", err)
	}
	system, err := pglogrepl.IdentifySystem(ctx, conn)
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("identify system: %w", err)
	}
	if cfg.Streaming && serverMajor(conn) < 14 {
		cfg.Streaming = false // protocol 2 streaming needs PostgreSQL 14
	}
	return &Stream{cfg: cfg, conn: conn, socket: socket, system: system, serverWAL: system.XLogPos}, nil
}

// decoderSettings parses connString and sets what the decoder needs to
// read values in text form: timestamptz in ISO format with a numeric
// offset, bytea in hex. appName is the default application_name.
func decoderSettings(connString, appName string) (*pgconn.Config, error) {
	pgcfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		// pgconn redacts the password in its parse errors.
		return nil, &PreflightError{Object: "--pg-url", Problem: err.Error(),
			Fix: "use postgres://user:password@host:port/database"}
	}
	pgcfg.RuntimeParams["DateStyle"] = "ISO"
	pgcfg.RuntimeParams["TimeZone"] = "UTC"
	pgcfg.RuntimeParams["bytea_output"] = "hex"
	if pgcfg.RuntimeParams["application_name"] == "" {
		pgcfg.RuntimeParams["application_name"] = appName
	}
	return pgcfg, nil
}

// Streaming reports whether the session uses protocol 2 streaming of
// in-progress transactions: asked for and supported by the server.
func (s *Stream) Streaming() bool { return s.cfg.Streaming }

// serverMajor is the server's major version, 0 when unknown.
func serverMajor(conn *pgconn.PgConn) int {
	v := conn.ParameterStatus("server_version")
	major := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			break
		}
		major = major*10 + int(c-'0')
	}
	return major
}

// SystemID is the database cluster's system identifier.
func (s *Stream) SystemID() string { return s.system.SystemID }

// Timeline is the server's current timeline.
func (s *Stream) Timeline() int32 { return s.system.Timeline }

// ServerWALEnd is where the server's WAL ended when the connection was
// made (IDENTIFY_SYSTEM's xlogpos, flushed WAL). A checkpoint or slot past
// it belongs to a history the database no longer has: it was restored
// from an older copy of itself.
func (s *Stream) ServerWALEnd() pglogrepl.LSN { return s.system.XLogPos }

// CreateSlot creates the logical slot with the pgoutput plugin (a failover
// slot where Config.Failover asks and the server has them) and returns its
// consistent point: streaming from there sees every later commit.
func (s *Stream) CreateSlot(ctx context.Context) (pglogrepl.LSN, error) {
	res, err := pglogrepl.CreateReplicationSlot(ctx, s.conn, s.cfg.Slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication,
			SnapshotAction: slotOptions(serverMajor(s.conn), "nothing", s.cfg.Failover)})
	if err != nil {
		return 0, classify(fmt.Sprintf("create replication slot %q", s.cfg.Slot), err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return 0, fmt.Errorf("parse consistent point %q: %w", res.ConsistentPoint, err)
	}
	return lsn, nil
}

// Start begins streaming pgoutput from the given LSN. PostgreSQL starts at
// the slot's confirmed_flush_lsn instead when that is later. durable is read
// for every status update; it must never return more than what is
// acknowledged downstream and saved.
func (s *Stream) Start(ctx context.Context, from pglogrepl.LSN, durable func() pglogrepl.LSN) error {
	if durable == nil {
		return errors.New("BUG: replication.Stream.Start without a durable position")
	}
	pub := strings.ReplaceAll(`"`+strings.ReplaceAll(s.cfg.Publication, `"`, `""`)+`"`, `'`, `''`)
	err := pglogrepl.StartReplication(ctx, s.conn, s.cfg.Slot, from, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: s.pluginArgs(pub),
	})
	if err != nil {
		return classify(fmt.Sprintf("start replication on slot %q", s.cfg.Slot), err)
	}
	s.socket.batch()
	s.received = from
	s.shownReceived.Store(uint64(from))
	s.durable = durable
	return nil
}

// Received is the end of the newest WAL data received, or the confirmed
// position when that is later (an idle stream confirms the server's WAL end
// from keepalives, past any data): the write position status updates
// report. Unlike the other methods, any goroutine may call it.
func (s *Stream) Received() pglogrepl.LSN {
	return max(pglogrepl.LSN(s.shownReceived.Load()), pglogrepl.LSN(s.shownConfirmed.Load()))
}

// Confirmed is the flush position last sent to the server (0 before the
// first status update). Any goroutine may call it.
func (s *Stream) Confirmed() pglogrepl.LSN { return pglogrepl.LSN(s.shownConfirmed.Load()) }

// pluginArgs are pgoutput's options for START_REPLICATION.
func (s *Stream) pluginArgs(publication string) []string {
	args := []string{"proto_version '1'", "publication_names '" + publication + "'"}
	if s.cfg.Streaming {
		args = []string{"proto_version '2'", "publication_names '" + publication + "'", "streaming 'on'"}
	}
	if s.cfg.Messages {
		args = append(args, "messages 'true'")
	}
	return args
}

// maxBatch bounds the messages Run sends in one batch; with the capacity
// of the channel it sends on, it bounds what waits for the decoder.
const maxBatch = 256

// slabSize is the size of the buffers Run copies messages' data into: one
// allocation holds a few hundred small messages instead of one each.
const slabSize = 64 << 10

// Run receives the stream and sends every message on out, in order, until
// ctx is done (it then returns nil) or the connection fails. It sends the
// messages in batches: all those one socket read brought (up to maxBatch),
// so a backlog costs the receiver one wake-up per batch rather than per
// message, and a trickle is handed on as soon as it is read. While out is
// full it stops reading but keeps sending status updates, so the server
// does not end the session after wal_sender_timeout. A batch of keepalives
// alone is dropped when out is full. Run closes out when it returns.
func (s *Stream) Run(ctx context.Context, out chan<- []Message) error {
	defer close(out)
	// Reads use the socket deadline rather than a context: a context per
	// ReceiveMessage costs a watcher per message. Cancellation wakes the read.
	stop := context.AfterFunc(ctx, func() { s.conn.Conn().SetReadDeadline(time.Now()) }) //nolint:errcheck
	defer stop()
	defer s.conn.Conn().SetReadDeadline(time.Time{}) //nolint:errcheck

	nextStatus := time.Now()
	var (
		deadline time.Time // the read deadline set on the socket
		batch    []Message
		slab     []byte // where the batch's data is copied to
	)
	for {
		if !time.Now().Before(nextStatus) {
			if err := s.sendStatus(false); err != nil {
				return err
			}
			nextStatus = time.Now().Add(s.cfg.StatusInterval)
		}
		if ctx.Err() != nil {
			return nil
		}
		// Setting a deadline takes the poller's lock: only when it moved,
		// not for every message of a backlog.
		if !deadline.Equal(nextStatus) {
			if err := s.conn.Conn().SetReadDeadline(nextStatus); err != nil {
				return fmt.Errorf("set read deadline: %w", err)
			}
			deadline = nextStatus
		}
		raw, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isTimeout(err) {
				continue
			}
			return fmt.Errorf("receive replication message: %w", err)
		}
		msg, reply, err := s.parse(raw)
		if err != nil {
			return err
		}
		if reply {
			if err := s.sendStatus(false); err != nil {
				return err
			}
			nextStatus = time.Now().Add(s.cfg.StatusInterval)
		}
		if msg != nil {
			// pgconn reuses its read buffer: keep a private copy.
			msg.Data, slab = copyToSlab(slab, msg.Data)
			batch = append(batch, *msg)
		}
		// What is left in pgconn's buffer was read by the same read: take
		// it into this batch before handing the batch on.
		if len(batch) == 0 || (len(batch) < maxBatch && s.conn.Frontend().ReadBufferLen() > 0) {
			continue
		}
		if nextStatus, err = s.deliver(ctx, out, batch, nextStatus); err != nil {
			return err
		}
		batch = make([]Message, 0, len(batch))
	}
}

// copyToSlab copies data (nil stays nil) to the free end of slab, or of a
// new slab when it does not fit, and returns the copy and the slab. The
// copy's capacity ends with it, so appending to it never touches a
// neighbour.
func copyToSlab(slab, data []byte) ([]byte, []byte) {
	if data == nil {
		return nil, slab
	}
	if cap(slab)-len(slab) < len(data) {
		slab = make([]byte, 0, max(slabSize, len(data)))
	}
	start := len(slab)
	slab = append(slab, data...)
	return slab[start:len(slab):len(slab)], slab
}

// deliver sends batch on out, waiting for room (and sending status updates
// on time meanwhile) unless the batch holds keepalives alone: those only
// matter when the pipeline is idle, and then out has room.
func (s *Stream) deliver(ctx context.Context, out chan<- []Message, batch []Message, nextStatus time.Time) (time.Time, error) {
	select {
	case out <- batch:
		return nextStatus, nil
	default:
	}
	if keepalivesOnly(batch) {
		return nextStatus, nil
	}
	timer := time.NewTimer(time.Until(nextStatus))
	defer timer.Stop()
	for {
		select {
		case out <- batch:
			return nextStatus, nil
		case <-ctx.Done():
			return nextStatus, nil
		case <-timer.C:
			if err := s.sendStatus(false); err != nil {
				return nextStatus, err
			}
			nextStatus = time.Now().Add(s.cfg.StatusInterval)
			timer.Reset(s.cfg.StatusInterval)
		}
	}
}

func keepalivesOnly(batch []Message) bool {
	for _, m := range batch {
		if m.Data != nil {
			return false
		}
	}
	return true
}

// parse reads one backend message. It returns the stream message (nil for
// none) and whether the server asked for an immediate status update.
func (s *Stream) parse(raw pgproto3.BackendMessage) (*Message, bool, error) {
	switch m := raw.(type) {
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return nil, false, errors.New("replication: empty CopyData message")
		}
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return nil, false, fmt.Errorf("parse keepalive: %w", err)
			}
			s.serverWAL = max(s.serverWAL, ka.ServerWALEnd)
			return &Message{ServerWALEnd: ka.ServerWALEnd}, ka.ReplyRequested, nil
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return nil, false, fmt.Errorf("parse XLogData: %w", err)
			}
			if end := xld.WALStart + pglogrepl.LSN(len(xld.WALData)); end > s.received {
				s.received = end
				s.shownReceived.Store(uint64(end))
			}
			s.serverWAL = max(s.serverWAL, xld.ServerWALEnd)
			// Data aliases pgconn's read buffer: Run copies it.
			return &Message{WALStart: xld.WALStart, ServerWALEnd: xld.ServerWALEnd, Data: xld.WALData}, false, nil
		}
		return nil, false, nil
	case *pgproto3.ErrorResponse:
		return nil, false, classify("replication stream", pgconn.ErrorResponseToPgError(m))
	case *pgproto3.CopyDone:
		return nil, false, errors.New("replication stream ended by the server (CopyDone)")
	case *pgproto3.NoticeResponse:
		return nil, false, s.skippedPublication(m)
	}
	return nil, false, nil
}

// skippedPublication turns PostgreSQL 18's warning that the walsender
// skipped a publication missing at this point in the WAL into the error
// older servers raise. Going on would be silent loss: the walsender then
// sends none of the table's rows, and keepalives would let outboxd confirm
// the WAL that holds them. Any other notice is nil. The warning (SQLSTATE
// 55000) is told by the server function that raises it, as its text may
// be translated, or else by its English text.
func (s *Stream) skippedPublication(n *pgproto3.NoticeResponse) error {
	severity := n.SeverityUnlocalized
	if severity == "" {
		severity = n.Severity
	}
	if severity != "WARNING" || (n.Routine != "LoadPublications" && !strings.HasPrefix(n.Message, "skipped loading publication")) {
		return nil
	}
	// The code of the error older servers raise, which MissingPublication
	// and the runbook's recovery know.
	return classify("replication stream", &pgconn.PgError{
		Severity: "ERROR", Code: "42704",
		Message: fmt.Sprintf("publication %q does not exist (the server skipped it: %s)", s.cfg.Publication, n.Message),
		Detail:  n.Detail,
	})
}

// sendStatus reports write = received, flush = apply = durable. The flush
// position is always set explicitly: pglogrepl copies write into a zero flush,
// which would confirm WAL that JetStream has not acknowledged (invariant 7).
// Flush never passes the server's WAL end: PostgreSQL stores a confirmed
// position it has not written yet in the slot, and would then skip the
// transactions it writes up to there. (Write is only reported.)
func (s *Stream) sendStatus(replyRequested bool) error {
	if s.durable == nil {
		return nil // not streaming: there is nothing to confirm
	}
	flush := min(s.durable(), s.serverWAL)
	write := max(s.received, flush)
	if flush == 0 {
		write = 0 // nothing durable yet: confirm nothing
	}
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: write,
		WALFlushPosition: flush,
		WALApplyPosition: flush,
		ReplyRequested:   replyRequested,
	})
	if err != nil {
		return fmt.Errorf("send standby status update: %w", err)
	}
	s.shownConfirmed.Store(uint64(flush))
	return nil
}

// Close sends a final status update with the durable position (when
// streaming) and closes the connection. Call it after Run has returned and
// the checkpoint is saved.
func (s *Stream) Close(ctx context.Context) error {
	err := s.sendStatus(false)
	s.conn.Close(ctx)
	return err
}

func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}
