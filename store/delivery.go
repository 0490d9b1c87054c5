package store

import (
	"encoding/binary"
	"fmt"
)

// deliveryVersion is the first byte of every encoded delivery row.
const deliveryVersion = 1

// StatePending is a delivery row waiting for its due time (or for a retry); its due key is in the index CF.
const StatePending uint8 = 0

// DeliveryRow is the state of one hook's delivery to one sink (deliveries CF, key DeliveryKey).
type DeliveryRow struct {
	SinkIndex uint16
	SinkType  string
	State     uint8
	Attempts  uint32
	DueAt     int64 // unix ms
	Size      uint32
}

// Encoding (version 1): version:8 sink_index:16 sink_type(uvarint len + bytes) state:8 attempts:32 due_at:64
// size:32, integers big-endian.

// AppendDeliveryRow appends the encoding of r to dst.
func AppendDeliveryRow(dst []byte, r *DeliveryRow) []byte {
	dst = append(dst, deliveryVersion)
	dst = binary.BigEndian.AppendUint16(dst, r.SinkIndex)
	dst = appendStr(dst, r.SinkType)
	dst = append(dst, r.State)
	dst = binary.BigEndian.AppendUint32(dst, r.Attempts)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.DueAt))
	return binary.BigEndian.AppendUint32(dst, r.Size)
}

// DecodeDeliveryRow decodes a delivery row; the result shares no memory with b. It never panics.
func DecodeDeliveryRow(b []byte) (DeliveryRow, error) {
	var r DeliveryRow
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != deliveryVersion {
		return DeliveryRow{}, fmt.Errorf("delivery row version %d: %w", v, ErrCorruptValue)
	}
	r.SinkIndex = d.uint16()
	r.SinkType = d.str()
	r.State = d.byte()
	r.Attempts = d.uint32()
	r.DueAt = int64(d.uint64())
	r.Size = d.uint32()
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return DeliveryRow{}, fmt.Errorf("cannot decode delivery row: %w", d.err)
	}
	return r, nil
}
