package edge

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// newID mints a UUIDv7: 48 bits of unix milliseconds, then random bits, so ids sort by
// arrival time and need no coordination (no lock, no shared counter).
func newID(now time.Time) [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[6:]) // crypto/rand.Read never fails on supported platforms
	ms := uint64(now.UnixMilli())
	binary.BigEndian.PutUint16(id[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(id[2:6], uint32(ms))
	id[6] = id[6]&0x0f | 0x70 // version 7
	id[8] = id[8]&0x3f | 0x80 // RFC 9562 variant
	return id
}

// appendID appends the canonical 36-character form of id.
func appendID(dst []byte, id [16]byte) []byte {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return append(dst, b[:]...)
}

// ParseID parses the canonical form appendID writes.
func ParseID(s string) ([16]byte, bool) {
	var id [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	parts := [...]struct{ from, to, at int }{{0, 8, 0}, {9, 13, 4}, {14, 18, 6}, {19, 23, 8}, {24, 36, 10}}
	for _, p := range parts {
		if _, err := hex.Decode(id[p.at:], []byte(s[p.from:p.to])); err != nil {
			return id, false
		}
	}
	return id, true
}
