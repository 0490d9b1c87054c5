package store

import (
	"encoding/binary"
	"fmt"
)

// deliveryVersion is the first byte of every delivery row this build writes; deliveryV1 rows (written before
// dispatch existed) are still read.
const (
	deliveryV1      = 1
	deliveryVersion = 2
)

// Delivery row states. The state decides which counter a waiting or claimed row belongs to, so it survives a
// claim: ClaimDue moves only index keys, never rewrites the row.
const (
	// StatePending is a first attempt waiting for its due time; its due key is in the index CF.
	StatePending uint8 = 0
	// StateScheduled is a retry or a parked row waiting for its due time; its due key is in the index CF.
	StateScheduled uint8 = 1
	// StateDead is a dead-lettered row; its dead key is in the index CF and its hook is kept.
	StateDead uint8 = 2
)

// DeliveryRow is the state of one hook's delivery to one sink (deliveries CF, key DeliveryKey).
type DeliveryRow struct {
	SinkIndex  uint16
	SinkType   string
	State      uint8
	Attempts   uint32
	DueAt      int64 // unix ms
	Size       uint32
	Source     string
	Ordered    bool
	ReceivedAt int64 // the hook's, unix ms
	LastError  string
	DeadReason string
	DeadAt     int64 // unix ms
	ReplayID   string
}

// Encoding, integers big-endian, strings uvarint length + bytes:
//
//	version 1: version:8 sink_index:16 sink_type state:8 attempts:32 due_at:64 size:32
//	version 2: version 1's fields, then source ordered:8(0|1) received_at:64 last_error dead_reason dead_at:64
//	           replay_id
//
// A version 1 row decodes with the later fields zero.

// AppendDeliveryRow appends the encoding (version 2) of r to dst.
func AppendDeliveryRow(dst []byte, r *DeliveryRow) []byte {
	dst = append(dst, deliveryVersion)
	dst = binary.BigEndian.AppendUint16(dst, r.SinkIndex)
	dst = appendStr(dst, r.SinkType)
	dst = append(dst, r.State)
	dst = binary.BigEndian.AppendUint32(dst, r.Attempts)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.DueAt))
	dst = binary.BigEndian.AppendUint32(dst, r.Size)
	dst = appendStr(dst, r.Source)
	dst = appendBool(dst, r.Ordered)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.ReceivedAt))
	dst = appendStr(dst, r.LastError)
	dst = appendStr(dst, r.DeadReason)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.DeadAt))
	return appendStr(dst, r.ReplayID)
}

// DecodeDeliveryRow decodes a delivery row of version 1 or 2; the result shares no memory with b. It never
// panics.
func DecodeDeliveryRow(b []byte) (DeliveryRow, error) {
	var r DeliveryRow
	d := decoder{b: b}
	v := d.byte()
	if d.err == nil && v != deliveryV1 && v != deliveryVersion {
		return DeliveryRow{}, fmt.Errorf("delivery row version %d: %w", v, ErrCorruptValue)
	}
	r.SinkIndex = d.uint16()
	r.SinkType = d.str()
	r.State = d.byte()
	r.Attempts = d.uint32()
	r.DueAt = int64(d.uint64())
	r.Size = d.uint32()
	if v == deliveryVersion {
		r.Source = d.str()
		r.Ordered = d.bool()
		r.ReceivedAt = int64(d.uint64())
		r.LastError = d.str()
		r.DeadReason = d.str()
		r.DeadAt = int64(d.uint64())
		r.ReplayID = d.str()
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return DeliveryRow{}, fmt.Errorf("cannot decode delivery row: %w", d.err)
	}
	return r, nil
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// bool reads a 0|1 byte; anything else is damage.
func (d *decoder) bool() bool {
	switch v := d.byte(); {
	case d.err != nil:
		return false
	case v == 1:
		return true
	case v != 0:
		d.fail("bool byte")
	}
	return false
}
