package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"

	"github.com/ankusa-go/ankusa/store"
)

// Segment object (version 1), all integers big-endian:
//
//	header   magic "ANKS" version:8 codec:8 reserved:16 (zero)
//	records  { len:32 crc32(payload):32 payload }*    payload = the stored hook (store.AppendHook format)
//	footer   magic "ANKE" count:32 sha256(header ‖ records):256
//
// The catalogue keeps the sha256 of the whole object as written. Index object (version 1):
//
//	magic "ANKI" version:8 reserved:24 (zero) segment_size:64 segment_sha256:256 count:32
//	{ id:128 seq:64 received_at:64 offset:64 length:32 }*count     (length includes the 8-byte frame header)
//	crc32(everything before):32
//
// CRCs are IEEE CRC-32 (hash/crc32.ChecksumIEEE).
const (
	segmentMagic  = "ANKS"
	footerMagic   = "ANKE"
	indexMagic    = "ANKI"
	formatVersion = 1
	// CodecRaw stores each hook value as is (storage.codec raw).
	CodecRaw = 1

	headerLen = 8
	footerLen = 4 + 4 + sha256.Size
	// SegmentOverhead is what a segment adds to its frames.
	SegmentOverhead = headerLen + footerLen
	// FrameOverhead is what a frame adds to its payload.
	FrameOverhead = 8

	indexHeaderLen = 4 + 4 + 8 + sha256.Size + 4
	indexEntryLen  = 16 + 8 + 8 + 8 + 4
)

// IndexEntry locates one hook in its segment.
type IndexEntry struct {
	ID         [16]byte
	Seq        uint64
	ReceivedAt int64 // unix ms
	Offset     int64 // of the frame in the segment object
	Length     uint32
}

// Index is a decoded index object.
type Index struct {
	SegmentSize   int64
	SegmentSHA256 [32]byte
	Entries       []IndexEntry
}

// Builder encodes one segment. The zero value is ready; Reset makes it reusable, keeping its buffers.
//
// The segment's sha256 is computed as the records are added (each frame hashed while it is still in the cache)
// and in one pass: the footer's digest of header and records is a copy of the running state, which then goes
// on over the footer to give the whole object's.
type Builder struct {
	buf     []byte
	entries []IndexEntry
	h       hash.Hash // sha256 of buf so far
}

// Reset starts a new segment.
func (b *Builder) Reset() {
	b.buf = append(b.buf[:0], segmentMagic...)
	b.buf = append(b.buf, formatVersion, CodecRaw, 0, 0)
	b.entries = b.entries[:0]
	if b.h == nil {
		b.h = sha256.New()
	}
	b.h.Reset()
	b.h.Write(b.buf)
}

// Len is the size the segment object will have if finished now.
func (b *Builder) Len() int { return max(len(b.buf), headerLen) + footerLen }

// Count is how many hooks were added.
func (b *Builder) Count() int { return len(b.entries) }

// Entries are the index entries of the hooks added so far (valid until the next Reset).
func (b *Builder) Entries() []IndexEntry { return b.entries }

// Add appends hook value v (store.AppendHook format) stored at seq. It refuses a value that is not a hook.
func (b *Builder) Add(seq uint64, v []byte) error {
	if len(b.buf) == 0 {
		b.Reset()
	}
	id, at, err := store.HookHead(v)
	if err != nil {
		return fmt.Errorf("hook %d: %w", seq, err)
	}
	if uint64(len(v)) > 1<<32-1-FrameOverhead {
		return fmt.Errorf("hook %d of %d bytes: too big for a frame", seq, len(v))
	}
	if need := len(b.buf) + FrameOverhead + len(v) + footerLen; need > cap(b.buf) {
		// Doubling, not append's growth by a quarter for big slices: a segment outgrowing its buffer copies it
		// a few times, not dozens (room for the footer is kept, so Finish never copies it).
		nb := make([]byte, len(b.buf), max(2*cap(b.buf), need))
		copy(nb, b.buf)
		b.buf = nb
	}
	off := int64(len(b.buf))
	b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(v)))
	b.buf = binary.BigEndian.AppendUint32(b.buf, crc32.ChecksumIEEE(v))
	b.buf = append(b.buf, v...)
	b.h.Write(b.buf[off:])
	b.entries = append(b.entries, IndexEntry{ID: id, Seq: seq, ReceivedAt: at, Offset: off,
		Length: uint32(FrameOverhead + len(v))})
	return nil
}

// Finish appends the footer and returns the segment object, its index object and the sha256 of the segment
// object. The slices stay valid until the next Reset or Add.
func (b *Builder) Finish(idx []byte) (seg []byte, index []byte, sum [32]byte) {
	if len(b.buf) == 0 {
		b.Reset()
	}
	end := len(b.buf)
	b.buf = append(b.buf, footerMagic...)
	b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(b.entries)))
	b.buf = b.h.Sum(b.buf) // sha256(header ‖ records); Sum leaves the running state as it was
	b.h.Write(b.buf[end:])
	b.h.Sum(sum[:0])
	return b.buf, AppendIndex(idx[:0], &Index{SegmentSize: int64(len(b.buf)), SegmentSHA256: sum, Entries: b.entries}), sum
}

// AppendIndex appends the encoding of x to dst.
func AppendIndex(dst []byte, x *Index) []byte {
	start := len(dst)
	dst = append(dst, indexMagic...)
	dst = append(dst, formatVersion, 0, 0, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(x.SegmentSize))
	dst = append(dst, x.SegmentSHA256[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(x.Entries)))
	for _, e := range x.Entries {
		dst = append(dst, e.ID[:]...)
		dst = binary.BigEndian.AppendUint64(dst, e.Seq)
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ReceivedAt))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Offset))
		dst = binary.BigEndian.AppendUint32(dst, e.Length)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
}

// DecodeIndex decodes an index object. It never panics: the count is checked against the bytes present before
// anything is allocated, and every entry must lie inside the segment it describes.
func DecodeIndex(b []byte) (Index, error) {
	var x Index
	if len(b) < indexHeaderLen+4 {
		return x, fmt.Errorf("index of %d bytes: %w", len(b), ErrCorrupt)
	}
	if string(b[:4]) != indexMagic || b[4] != formatVersion || b[5]|b[6]|b[7] != 0 {
		return x, fmt.Errorf("index header %x: %w", b[:8], ErrCorrupt)
	}
	body, crc := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != crc {
		return x, fmt.Errorf("index crc mismatch: %w", ErrCorrupt)
	}
	x.SegmentSize = int64(binary.BigEndian.Uint64(b[8:]))
	copy(x.SegmentSHA256[:], b[16:48])
	n := binary.BigEndian.Uint32(b[48:])
	rest := body[indexHeaderLen:]
	if uint64(len(rest)) != uint64(n)*indexEntryLen {
		return Index{}, fmt.Errorf("index says %d entries in %d bytes: %w", n, len(rest), ErrCorrupt)
	}
	if x.SegmentSize < SegmentOverhead {
		return Index{}, fmt.Errorf("index names a segment of %d bytes: %w", x.SegmentSize, ErrCorrupt)
	}
	x.Entries = make([]IndexEntry, n)
	for i := range x.Entries {
		e := rest[i*indexEntryLen:]
		x.Entries[i] = IndexEntry{
			ID:         [16]byte(e[:16]),
			Seq:        binary.BigEndian.Uint64(e[16:]),
			ReceivedAt: int64(binary.BigEndian.Uint64(e[24:])),
			Offset:     int64(binary.BigEndian.Uint64(e[32:])),
			Length:     binary.BigEndian.Uint32(e[40:]),
		}
		ent := x.Entries[i]
		if ent.Offset < headerLen || ent.Length < FrameOverhead ||
			ent.Offset > x.SegmentSize-footerLen-int64(ent.Length) {
			return Index{}, fmt.Errorf("index entry %d (offset %d, length %d) outside its segment: %w", i,
				ent.Offset, ent.Length, ErrCorrupt)
		}
	}
	return x, nil
}

// DecodeFrame checks one frame (length and CRC) and returns its payload, a view into b.
func DecodeFrame(b []byte) ([]byte, error) {
	if len(b) < FrameOverhead {
		return nil, fmt.Errorf("frame of %d bytes: %w", len(b), ErrCorrupt)
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) != uint64(len(b)-FrameOverhead) {
		return nil, fmt.Errorf("frame says %d bytes, has %d: %w", n, len(b)-FrameOverhead, ErrCorrupt)
	}
	p := b[FrameOverhead:]
	if crc32.ChecksumIEEE(p) != binary.BigEndian.Uint32(b[4:]) {
		return nil, fmt.Errorf("frame crc mismatch: %w", ErrCorrupt)
	}
	return p, nil
}

// DecodeSegment checks a whole segment object (header, every frame, footer count and digest) and calls fn with
// each record's offset and payload (a view into seg) in order, stopping at fn's first error.
func DecodeSegment(seg []byte, fn func(off int64, payload []byte) error) error {
	if len(seg) < SegmentOverhead {
		return fmt.Errorf("segment of %d bytes: %w", len(seg), ErrCorrupt)
	}
	if string(seg[:4]) != segmentMagic || seg[4] != formatVersion || seg[5] != CodecRaw || seg[6]|seg[7] != 0 {
		return fmt.Errorf("segment header %x: %w", seg[:headerLen], ErrCorrupt)
	}
	end := len(seg) - footerLen
	foot := seg[end:]
	if string(foot[:4]) != footerMagic {
		return fmt.Errorf("segment footer %x: %w", foot[:4], ErrCorrupt)
	}
	if sum := sha256.Sum256(seg[:end]); !bytes.Equal(sum[:], foot[8:]) {
		return fmt.Errorf("segment digest mismatch: %w", ErrCorrupt)
	}
	want := binary.BigEndian.Uint32(foot[4:])
	var count uint32
	for off := headerLen; off < end; {
		if end-off < FrameOverhead {
			return fmt.Errorf("torn frame at %d: %w", off, ErrCorrupt)
		}
		n := int(binary.BigEndian.Uint32(seg[off:]))
		if n > end-off-FrameOverhead {
			return fmt.Errorf("frame at %d says %d bytes past the records: %w", off, n, ErrCorrupt)
		}
		p, err := DecodeFrame(seg[off : off+FrameOverhead+n])
		if err != nil {
			return fmt.Errorf("frame at %d: %w", off, err)
		}
		if err := fn(int64(off), p); err != nil {
			return err
		}
		count++
		off += FrameOverhead + n
	}
	if count != want {
		return fmt.Errorf("segment footer says %d records, holds %d: %w", want, count, ErrCorrupt)
	}
	return nil
}

func sumOf(b []byte) [32]byte { return sha256.Sum256(b) }
