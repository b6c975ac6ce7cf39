package decoder

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jackc/pglogrepl"
)

// Spool keeps the changes of transactions that PostgreSQL streams while they
// are still in progress (pgoutput protocol version 2, streaming 'on') on
// disk until they commit, so that one huge transaction does not have to fit
// in memory (docs/design.md invariant 6). The Decoder it is given to (through
// Config.Spool) writes to it; Decoder.Replay reads a committed transaction
// back.
//
// Each streamed top-level transaction gets one append-only file in a
// private directory. A record is the (sub)transaction xid, the WAL start of
// the message and the message in protocol version 1 form (the in-stream xid
// removed), so replay goes through the same code as a transaction sent
// whole. Writes and reads are buffered; memory does not grow with the size
// of a transaction: one write and one read buffer for the whole Spool, and
// a few words per open transaction (plus one entry per aborted
// subtransaction that had changes spooled).
//
// The files live only as long as the process: PostgreSQL sends every
// transaction still in progress again from its first segment on the next
// connection, and nothing of such a transaction has been published, so a
// restart loses nothing by losing the spool.
//
// A Spool serves one Decoder at a time from that Decoder's goroutine; it is
// not safe for concurrent use.
type Spool struct {
	dir    string
	closed bool

	txs map[uint32]*spoolTx // streamed, neither committed nor aborted
	seg *spoolTx            // the transaction of the open stream segment

	f   *os.File      // seg's file while a segment writes to it
	w   *bufio.Writer // reused by every segment
	r   *bufio.Reader // reused by every replay
	hdr [recordHeaderSize]byte
}

// spoolTx is one streamed top-level transaction.
type spoolTx struct {
	xid     uint32
	path    string
	records int64 // records written; the file exists once this is > 0
	bytes   int64
	// aborted holds the subtransactions PostgreSQL reported aborted; their
	// records stay in the file and are skipped at replay.
	aborted map[uint32]struct{}
	// rels is, per relation id, the layout last spooled: an Insert whose
	// cached layout is another one gets it spooled first, so replay reads
	// every row with the layout it was checked against, whatever other
	// transactions send before the commit.
	rels map[uint32]*relation
}

const (
	// recordHeaderSize is a record's sub xid (4 bytes), WAL start (8) and
	// message length (4).
	recordHeaderSize = 16
	// maxRecordSize bounds a record read back: PostgreSQL messages stay
	// under 1 GiB (MaxAllocSize), so anything larger is a damaged file, and
	// must not become an allocation of that size.
	maxRecordSize = 1 << 30
	spoolBufSize  = 64 << 10
)

// NewSpool creates a Spool whose files go into a new private directory
// under dir; dir "" means os.TempDir(). Close removes the directory.
func NewSpool(dir string) (*Spool, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	private, err := os.MkdirTemp(dir, "outboxd-spool-")
	if err != nil {
		return nil, fmt.Errorf("create spool directory: %w", err)
	}
	return &Spool{
		dir: private,
		txs: make(map[uint32]*spoolTx),
		w:   bufio.NewWriterSize(nil, spoolBufSize),
		r:   bufio.NewReaderSize(nil, spoolBufSize),
	}, nil
}

// Close removes the Spool's directory and every transaction in it. It is
// safe to call more than once; the Spool cannot be used afterwards.
func (s *Spool) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.f != nil {
		errs = append(errs, s.f.Close())
		s.f = nil
	}
	s.seg = nil
	clear(s.txs)
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove spool directory: %w", err))
	}
	return errors.Join(errs...)
}

var errSpoolClosed = errors.New("spool is closed")

// open counts the streamed transactions neither committed nor aborted.
func (s *Spool) open() int { return len(s.txs) }

// inSegment reports whether a stream segment is open (after Stream Start,
// before Stream Stop).
func (s *Spool) inSegment() bool { return s.seg != nil }

// segmentXid is the top-level xid of the open segment.
func (s *Spool) segmentXid() uint32 { return s.seg.xid }

// reset forgets every transaction, for a new replication stream: the server
// sends whatever is still in progress again from its first segment.
func (s *Spool) reset() error {
	if s.closed {
		return errSpoolClosed
	}
	var errs []error
	if s.f != nil {
		errs = append(errs, s.f.Close())
		s.f = nil
	}
	s.seg = nil
	for xid, tx := range s.txs {
		errs = append(errs, s.remove(tx))
		delete(s.txs, xid)
	}
	return errors.Join(errs...)
}

// startSegment opens a stream segment of top-level transaction xid.
func (s *Spool) startSegment(xid uint32, first bool) error {
	if s.closed {
		return errSpoolClosed
	}
	tx := s.txs[xid]
	switch {
	case first && tx != nil:
		return malformed("stream start: first segment of xid %d, which is already streaming", xid)
	case !first && tx == nil:
		return malformed("stream start: a later segment of xid %d, whose first segment was never received", xid)
	case first:
		tx = &spoolTx{xid: xid, path: filepath.Join(s.dir, strconv.FormatUint(uint64(xid), 10)+".spool")}
		s.txs[xid] = tx
	}
	s.seg = tx
	return nil
}

// stopSegment writes out the open segment and closes its file, so that
// however many transactions are streaming at most one file is open.
func (s *Spool) stopSegment() error {
	tx := s.seg
	s.seg = nil
	if s.f == nil {
		return nil
	}
	f := s.f
	s.f = nil
	err := s.w.Flush()
	s.w.Reset(nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spool xid %d: write %s: %w", tx.xid, tx.path, err)
	}
	return nil
}

// append adds one record to the open segment's transaction: typ and body
// are the message in protocol version 1 form.
func (s *Spool) append(subxid uint32, walStart pglogrepl.LSN, typ byte, body []byte) error {
	tx := s.seg
	if s.closed {
		return errSpoolClosed
	}
	if len(body) >= maxRecordSize {
		return fmt.Errorf("spool xid %d: message of %d bytes is too large", tx.xid, len(body)+1)
	}
	if s.f == nil {
		flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
		if tx.records == 0 {
			flags |= os.O_TRUNC
		}
		f, err := os.OpenFile(tx.path, flags, 0o600)
		if err != nil {
			return fmt.Errorf("spool xid %d: %w", tx.xid, err)
		}
		s.f = f
		s.w.Reset(f)
	}
	binary.BigEndian.PutUint32(s.hdr[0:], subxid)
	binary.BigEndian.PutUint64(s.hdr[4:], uint64(walStart))
	binary.BigEndian.PutUint32(s.hdr[12:], uint32(1+len(body)))
	s.w.Write(s.hdr[:])
	s.w.WriteByte(typ)
	if _, err := s.w.Write(body); err != nil {
		// bufio.Writer keeps its first error, so checking the last write
		// covers the two before it.
		return fmt.Errorf("spool xid %d: write %s: %w", tx.xid, tx.path, err)
	}
	tx.records++
	tx.bytes += int64(recordHeaderSize + 1 + len(body))
	return nil
}

// appendRelation spools rel's Relation message for the open segment's
// transaction, unless it is the layout last spooled there.
func (s *Spool) appendRelation(subxid uint32, walStart pglogrepl.LSN, rel *relation) error {
	tx := s.seg
	if tx.rels[rel.id] == rel {
		return nil
	}
	if err := s.append(subxid, walStart, 'R', rel.raw); err != nil {
		return err
	}
	if tx.rels == nil {
		tx.rels = make(map[uint32]*relation)
	}
	tx.rels[rel.id] = rel
	return nil
}

// abort handles Stream Abort: the whole transaction when subxid == xid,
// otherwise one subtransaction, whose records are then skipped at replay.
func (s *Spool) abort(xid, subxid uint32) error {
	if s.closed {
		return errSpoolClosed
	}
	tx := s.txs[xid]
	if tx == nil {
		// Nothing was streamed for it, or it was aborted already.
		return nil
	}
	if subxid == xid {
		delete(s.txs, xid)
		return s.remove(tx)
	}
	if tx.records == 0 {
		return nil
	}
	if tx.aborted == nil {
		tx.aborted = make(map[uint32]struct{})
	}
	tx.aborted[subxid] = struct{}{}
	return nil
}

// take removes a committed transaction from the open ones and returns it
// (nil when nothing was ever streamed for xid).
func (s *Spool) take(xid uint32) *spoolTx {
	tx := s.txs[xid]
	delete(s.txs, xid)
	return tx
}

// remove deletes tx's file.
func (s *Spool) remove(tx *spoolTx) error {
	if tx == nil || tx.records == 0 {
		return nil
	}
	tx.records = 0
	if err := os.Remove(tx.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("spool xid %d: %w", tx.xid, err)
	}
	return nil
}

// spoolRecord is one record read back.
type spoolRecord struct {
	subxid   uint32
	walStart pglogrepl.LSN
	msg      []byte // type byte first, as passed to Decode
}

// spoolReader reads one transaction's file from the start.
type spoolReader struct {
	s  *Spool
	tx *spoolTx
	f  *os.File
}

func (s *Spool) reader(tx *spoolTx) (*spoolReader, error) {
	if s.closed {
		return nil, errSpoolClosed
	}
	if tx.records == 0 {
		return &spoolReader{s: s, tx: tx}, nil
	}
	f, err := os.Open(tx.path)
	if err != nil {
		return nil, fmt.Errorf("spool xid %d: %w", tx.xid, err)
	}
	s.r.Reset(f)
	return &spoolReader{s: s, tx: tx, f: f}, nil
}

// next returns the next record not skipped, reading its message into buf
// when it is large enough (a nil buf, or a small one, makes a new slice);
// io.EOF after the last. Records of aborted subtransactions are skipped,
// except Relation messages: they describe a table, not a change, and later
// changes of the transaction may rely on them (pgoutput sends a table's
// layout once per streamed transaction).
func (sr *spoolReader) next(buf []byte) (spoolRecord, error) {
	if sr.f == nil {
		return spoolRecord{}, io.EOF
	}
	r := sr.s.r
	for {
		hdr := sr.s.hdr[:]
		if _, err := io.ReadFull(r, hdr); err != nil {
			if err == io.EOF {
				return spoolRecord{}, io.EOF
			}
			return spoolRecord{}, sr.corrupt("record header", err)
		}
		rec := spoolRecord{
			subxid:   binary.BigEndian.Uint32(hdr[0:]),
			walStart: pglogrepl.LSN(binary.BigEndian.Uint64(hdr[4:])),
		}
		n := binary.BigEndian.Uint32(hdr[12:])
		if n == 0 || n > maxRecordSize {
			return spoolRecord{}, sr.corrupt(fmt.Sprintf("record length %d", n), nil)
		}
		if _, skip := sr.tx.aborted[rec.subxid]; skip {
			typ, err := r.Peek(1)
			if err != nil {
				return spoolRecord{}, sr.corrupt("record", err)
			}
			if typ[0] != 'R' {
				if _, err := r.Discard(int(n)); err != nil {
					return spoolRecord{}, sr.corrupt("record", err)
				}
				continue
			}
		}
		if uint64(cap(buf)) >= uint64(n) {
			buf = buf[:n]
		} else {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			return spoolRecord{}, sr.corrupt("record", err)
		}
		rec.msg = buf
		return rec, nil
	}
}

func (sr *spoolReader) corrupt(what string, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return fmt.Errorf("spool xid %d: read %s: %s: %w", sr.tx.xid, sr.tx.path, what, err)
	}
	return fmt.Errorf("spool xid %d: %s is damaged: bad %s", sr.tx.xid, sr.tx.path, what)
}

func (sr *spoolReader) close() error {
	if sr.f == nil {
		return nil
	}
	sr.s.r.Reset(nil)
	err := sr.f.Close()
	sr.f = nil
	return err
}
