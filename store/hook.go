package store

import (
	"encoding/binary"
	"fmt"
)

// hookVersion is the first byte of every encoded hook; a decoder refuses a version it does not know rather
// than guess at its layout.
const hookVersion = 1

// Header is one stored request header, in the order the edge kept it.
type Header struct{ Name, Value string }

// Hook is one accepted webhook as stored in the hooks CF.
type Hook struct {
	ID          [16]byte // UUIDv7 minted at the edge
	ReceivedAt  int64    // unix ms
	Tenant      string
	Source      string
	ContentType string
	Headers     []Header
	Body        []byte // byte-for-byte as received
	Flagged     bool
	DedupeKey   string
}

// Encoding (version 1), deterministic: the same Hook always encodes to the same bytes.
//
//	version:8 id:128 received_at:64(BE) tenant source content_type
//	n_headers:uvarint {name value}*n body flagged:8(0|1) dedupe_key
//
// where every string and the body are uvarint length + bytes.

// HookSize returns the encoded size of h, so a caller can size its buffer once.
func HookSize(h *Hook) int {
	n := 1 + 16 + 8
	n += strSize(len(h.Tenant)) + strSize(len(h.Source)) + strSize(len(h.ContentType))
	n += uvarintSize(uint64(len(h.Headers)))
	for i := range h.Headers {
		n += strSize(len(h.Headers[i].Name)) + strSize(len(h.Headers[i].Value))
	}
	n += strSize(len(h.Body)) + 1 + strSize(len(h.DedupeKey))
	return n
}

// AppendHook appends the encoding of h to dst. It allocates only when dst lacks the capacity (HookSize tells
// how much to reserve).
func AppendHook(dst []byte, h *Hook) []byte {
	if need := HookSize(h); cap(dst)-len(dst) < need {
		grown := make([]byte, len(dst), len(dst)+need)
		copy(grown, dst)
		dst = grown
	}
	dst = append(dst, hookVersion)
	dst = append(dst, h.ID[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.ReceivedAt))
	dst = appendStr(dst, h.Tenant)
	dst = appendStr(dst, h.Source)
	dst = appendStr(dst, h.ContentType)
	dst = binary.AppendUvarint(dst, uint64(len(h.Headers)))
	for i := range h.Headers {
		dst = appendStr(dst, h.Headers[i].Name)
		dst = appendStr(dst, h.Headers[i].Value)
	}
	dst = binary.AppendUvarint(dst, uint64(len(h.Body)))
	dst = append(dst, h.Body...)
	if h.Flagged {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	return appendStr(dst, h.DedupeKey)
}

// DecodeHook decodes a hook value. The result shares no memory with b (b may point into C memory that is freed
// right after). It never panics: any malformed input is ErrCorruptValue.
func DecodeHook(b []byte) (Hook, error) {
	var h Hook
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != hookVersion {
		return Hook{}, fmt.Errorf("hook version %d: %w", v, ErrCorruptValue)
	}
	copy(h.ID[:], d.fixed(16))
	h.ReceivedAt = int64(d.uint64())
	h.Tenant = d.str()
	h.Source = d.str()
	h.ContentType = d.str()
	// Every header takes at least two bytes, so a count above half of what is left is damage, refused before
	// it sizes an allocation.
	if n := d.uvarint(); d.err == nil {
		if n > uint64(len(d.b))/2 {
			d.fail("header count")
		} else if n > 0 {
			h.Headers = make([]Header, n)
			for i := range h.Headers {
				h.Headers[i] = Header{Name: d.str(), Value: d.str()}
			}
		}
	}
	if body := d.bytes(); d.err == nil {
		h.Body = append([]byte(nil), body...)
	}
	switch f := d.byte(); {
	case d.err != nil:
	case f == 1:
		h.Flagged = true
	case f != 0:
		d.fail("flagged byte")
	}
	h.DedupeKey = d.str()
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return Hook{}, fmt.Errorf("cannot decode hook: %w", d.err)
	}
	return h, nil
}

func appendStr[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func strSize(n int) int { return uvarintSize(uint64(n)) + n }

func uvarintSize(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// decoder reads a value front to back; the first failure sticks, so callers check err once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s at %d bytes from the end: %w", what, len(d.b), ErrCorruptValue)
	}
	d.b = nil
}

func (d *decoder) fixed(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.fail("short value")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if v := d.fixed(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) uint16() uint16 {
	if v := d.fixed(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) uint32() uint32 {
	if v := d.fixed(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) uint64() uint64 {
	if v := d.fixed(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a length-prefixed field as a view into the input; callers copy it.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length past the end")
		return nil
	}
	return d.fixed(int(n))
}

// str returns a length-prefixed field as a string (a copy).
func (d *decoder) str() string {
	return string(d.bytes())
}
