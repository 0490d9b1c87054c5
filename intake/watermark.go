package intake

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

// watermarkVersion is the first byte of m:intake_offset.
const watermarkVersion = 1

// Watermark is m:intake_offset: every hook of this node with a seq below Seq is in the store (or was delivered
// from it), and a replay that reads each partition of the topic from Offsets (next offset to read; absent:
// from the start) finds every record holding a hook at or above Seq.
type Watermark struct {
	Seq     uint64
	Offsets map[int32]int64
}

// AppendWatermark encodes w (version 1: version byte, seq, partition count, then partition and offset pairs in
// partition order).
func AppendWatermark(dst []byte, w Watermark) []byte {
	dst = append(dst, watermarkVersion)
	dst = binary.BigEndian.AppendUint64(dst, w.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(w.Offsets)))
	for _, p := range slices.Sorted(maps.Keys(w.Offsets)) {
		dst = binary.BigEndian.AppendUint32(dst, uint32(p))
		dst = binary.BigEndian.AppendUint64(dst, uint64(w.Offsets[p]))
	}
	return dst
}

// DecodeWatermark decodes AppendWatermark's output.
func DecodeWatermark(b []byte) (Watermark, error) {
	w := Watermark{Offsets: map[int32]int64{}}
	if len(b) < 9 || b[0] != watermarkVersion {
		return Watermark{}, fmt.Errorf("%w: watermark header", ErrCorruptRecord)
	}
	w.Seq = binary.BigEndian.Uint64(b[1:])
	b = b[9:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n*12 != uint64(len(b)-k) {
		return Watermark{}, fmt.Errorf("%w: watermark offsets", ErrCorruptRecord)
	}
	b = b[k:]
	for range n {
		w.Offsets[int32(binary.BigEndian.Uint32(b))] = int64(binary.BigEndian.Uint64(b[4:]))
		b = b[12:]
	}
	return w, nil
}
