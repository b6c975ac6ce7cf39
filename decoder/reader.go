package decoder

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// reader walks a pgoutput message with a bounds check on every read. After
// the first read that does not fit, every later read returns a zero value
// and short names the field that did not fit, so a parser can read a whole
// fixed layout and check once instead of after every field.
type reader struct {
	b     []byte
	off   int
	short string // the first field that did not fit; "" while all fit
}

func (r *reader) need(n int, what string) bool {
	if r.short != "" {
		return false
	}
	if n < 0 || len(r.b)-r.off < n {
		r.short = what
		return false
	}
	return true
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) u8(what string) byte {
	if !r.need(1, what) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16(what string) uint16 {
	if !r.need(2, what) {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32(what string) uint32 {
	if !r.need(4, what) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64(what string) uint64 {
	if !r.need(8, what) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// cstring returns the bytes up to the next NUL (excluded) and moves past it.
func (r *reader) cstring(what string) []byte {
	if r.short != "" {
		return nil
	}
	end := bytes.IndexByte(r.b[r.off:], 0)
	if end < 0 {
		r.short = what
		return nil
	}
	v := r.b[r.off : r.off+end : r.off+end]
	r.off += end + 1
	return v
}

// bytes returns the next n bytes, aliasing the message.
func (r *reader) bytes(n int, what string) []byte {
	if !r.need(n, what) {
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

// value reads one TupleData column: its kind byte and, for text and binary
// values, the length-prefixed bytes. val is nil for NULL and unchanged
// TOAST, and non-nil (possibly empty) for text and binary values, so an
// empty string is not mistaken for NULL.
func (r *reader) value() (kind byte, val []byte) {
	kind = r.u8("column kind")
	switch kind {
	case 't', 'b':
		n := r.u32("column length")
		if r.short != "" {
			return kind, nil
		}
		// Compare in uint64: on 32-bit platforms int(n) could go negative.
		if uint64(n) > uint64(r.remaining()) {
			r.short = "column value"
			return kind, nil
		}
		return kind, r.bytes(int(n), "column value")
	}
	return kind, nil
}

// check turns the first short read, or bytes left over after a complete
// message, into an error wrapping ErrMalformed.
func (r *reader) check(msg string) error {
	if r.short != "" {
		return malformed("%s: truncated at byte %d of %d reading %s", msg, r.off+1, len(r.b)+1, r.short)
	}
	if r.off != len(r.b) {
		return malformed("%s: %d unexpected bytes after the end of the message", msg, len(r.b)-r.off)
	}
	return nil
}

// malformed returns an error wrapping ErrMalformed. The offsets in messages
// count the message type byte, so they match a hex dump of the XLogData.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}
