package store

import (
	"encoding/binary"
	"fmt"
)

// hookVersion is the first byte of every hook this build encodes; a decoder refuses a version it does not
// know rather than guess at its layout. Version 1 (no verification byte) is still read.
const (
	hookVersion   = 2
	hookVersionV1 = 1
)

// knownHookVersion reports whether b is the version byte of a hook this build decodes.
func knownHookVersion(b byte) bool { return b == hookVersion || b == hookVersionV1 }

// Verification is the verification status stored with a hook (inventory C.1: ok | failed | skipped).
type Verification uint8

const (
	// VerificationUnknown: a hook stored before the status was recorded (version 1) and not flagged.
	VerificationUnknown Verification = iota
	// VerificationOK: the request carried proof made with a configured key.
	VerificationOK
	// VerificationFailed: verification failed and the source accepts such hooks flagged (accept_flag).
	VerificationFailed
	// VerificationSkipped: the source verifies nothing (verify type none).
	VerificationSkipped
)

// String is the status as sinks send it: "ok", "failed", "skipped", or "" when unknown.
func (v Verification) String() string {
	switch v {
	case VerificationOK:
		return "ok"
	case VerificationFailed:
		return "failed"
	case VerificationSkipped:
		return "skipped"
	}
	return ""
}

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
	Flagged     bool   // accepted although verification failed (accept_flag)
	DedupeKey   string
	// Verification is the status the edge's verifier gave the request; a flagged hook is always Failed.
	Verification Verification
}

// Encoding (version 2), deterministic: the same Hook always encodes to the same bytes.
//
//	version:8 id:128 received_at:64(BE) tenant source content_type
//	n_headers:uvarint {name value}*n body flagged:8(0|1) dedupe_key verification:8(0..3)
//
// where every string and the body are uvarint length + bytes. Version 1 is the same without the verification
// byte; such a hook decodes as VerificationFailed when flagged (the only way a failed hook was stored) and
// VerificationUnknown otherwise (ok and skipped were not told apart).

// HookSize returns the encoded size of h, so a caller can size its buffer once.
func HookSize(h *Hook) int {
	n := 1 + 16 + 8
	n += strSize(len(h.Tenant)) + strSize(len(h.Source)) + strSize(len(h.ContentType))
	n += uvarintSize(uint64(len(h.Headers)))
	for i := range h.Headers {
		n += strSize(len(h.Headers[i].Name)) + strSize(len(h.Headers[i].Value))
	}
	n += strSize(len(h.Body)) + 1 + strSize(len(h.DedupeKey)) + 1
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
	dst = appendStr(dst, h.DedupeKey)
	return append(dst, byte(h.Verification))
}

// DecodeHook decodes a hook value. The result shares no memory with b (b may point into C memory that is freed
// right after). It never panics: any malformed input is ErrCorruptValue.
func DecodeHook(b []byte) (Hook, error) {
	var h Hook
	d := decoder{b: b}
	v := d.byte()
	if d.err == nil && !knownHookVersion(v) {
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
	switch {
	case d.err != nil:
	case v == hookVersionV1:
		if h.Flagged {
			h.Verification = VerificationFailed
		}
	default:
		if h.Verification = Verification(d.byte()); d.err == nil && h.Verification > VerificationSkipped {
			d.fail("verification byte")
		}
	}
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

// HookHead reads the id and received_at of an encoded hook without decoding the rest (the archive indexes
// segments by them).
func HookHead(v []byte) (id [16]byte, receivedAt int64, err error) {
	if len(v) < 1+16+8 || !knownHookVersion(v[0]) {
		return id, 0, fmt.Errorf("hook head of %d bytes: %w", len(v), ErrCorruptValue)
	}
	return [16]byte(v[1:17]), int64(binary.BigEndian.Uint64(v[17:25])), nil
}
