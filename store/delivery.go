package store

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// deliveryVersion is the first byte of every delivery row this build writes; deliveryV1 rows (written before
// dispatch existed) and deliveryV2 rows (written before the attempt history) are still read.
const (
	deliveryV1      = 1
	deliveryV2      = 2
	deliveryVersion = 3
)

// History bounds: a row keeps its last MaxHistory attempts (Attempts still counts them all), each error cut to
// at most MaxAttemptError bytes of valid UTF-8.
const (
	MaxHistory      = 10
	MaxAttemptError = 200
)

// Attempt outcome classes, as the dispatcher reports them.
const (
	AttemptOK        uint8 = 1
	AttemptTransient uint8 = 2
	AttemptPermanent uint8 = 3
	AttemptTimeout   uint8 = 4
)

// Attempt is one delivery attempt in a row's history.
type Attempt struct {
	Number    uint32 // 1 for the first attempt
	StartedAt int64  // unix ms
	LatencyUS uint32 // microseconds, saturated
	Class     uint8  // AttemptOK...AttemptTimeout
	Status    uint16 // the status code the sink reported (HTTP), 0 if none
	Error     string // at most MaxAttemptError bytes
}

// withAttempt returns history with a appended (its error cut to MaxAttemptError) and only the last MaxHistory
// kept, in a new slice: history may be shared with a claimed row's copy.
func withAttempt(history []Attempt, a Attempt) []Attempt {
	a.Error = cutError(a.Error)
	keep := history[max(0, len(history)-(MaxHistory-1)):]
	out := make([]Attempt, 0, len(keep)+1)
	return append(append(out, keep...), a)
}

// cutError cuts s to at most MaxAttemptError bytes without splitting a UTF-8 sequence, and replaces invalid
// bytes, so the stored text is always valid UTF-8 (it is served in JSON and HTML).
func cutError(s string) string {
	if len(s) > MaxAttemptError {
		n := MaxAttemptError
		for n > 0 && n > MaxAttemptError-3 && s[n]&0xC0 == 0x80 {
			n--
		}
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

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
	History    []Attempt // the last MaxHistory attempts, oldest first
}

// Encoding, integers big-endian, strings uvarint length + bytes:
//
//	version 1: version:8 sink_index:16 sink_type state:8 attempts:32 due_at:64 size:32
//	version 2: version 1's fields, then source ordered:8(0|1) received_at:64 last_error dead_reason dead_at:64
//	           replay_id
//	version 3: version 2's fields, then count:8 and count attempts, oldest first:
//	           number:32 started_at:64 latency_us:32 class:8 status:16 error
//
// A version 1 or 2 row decodes with the later fields zero (no history).

// AppendDeliveryRow appends the encoding (version 3) of r to dst; only the last MaxHistory attempts are kept.
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
	dst = appendStr(dst, r.ReplayID)
	return appendHistory(dst, r.History)
}

// appendHistory appends count:8 and the last MaxHistory attempts of h, oldest first (delivery rows and
// delivered records share it).
func appendHistory(dst []byte, h []Attempt) []byte {
	h = h[max(0, len(h)-MaxHistory):]
	dst = append(dst, uint8(len(h)))
	for i := range h {
		a := &h[i]
		dst = binary.BigEndian.AppendUint32(dst, a.Number)
		dst = binary.BigEndian.AppendUint64(dst, uint64(a.StartedAt))
		dst = binary.BigEndian.AppendUint32(dst, a.LatencyUS)
		dst = append(dst, a.Class)
		dst = binary.BigEndian.AppendUint16(dst, a.Status)
		dst = appendStr(dst, a.Error)
	}
	return dst
}

// history reads what appendHistory wrote; equal consecutive errors (and errors equal to prev) share one string.
func (d *decoder) history(prev string) []Attempt {
	n := int(d.byte())
	if d.err == nil && n > MaxHistory {
		d.fail("attempt history length")
	}
	if d.err != nil || n == 0 {
		return nil
	}
	h := make([]Attempt, n)
	for i := range h {
		a := &h[i]
		a.Number = d.uint32()
		a.StartedAt = int64(d.uint64())
		a.LatencyUS = d.uint32()
		a.Class = d.byte()
		a.Status = d.uint16()
		a.Error = d.strLike(prev)
		prev = a.Error
	}
	return h
}

// DecodeDeliveryRow decodes a delivery row of version 1, 2 or 3; the result shares no memory with b. It never
// panics.
func DecodeDeliveryRow(b []byte) (DeliveryRow, error) {
	var r DeliveryRow
	d := decoder{b: b}
	v := d.byte()
	if d.err == nil && (v < deliveryV1 || v > deliveryVersion) {
		return DeliveryRow{}, fmt.Errorf("delivery row version %d: %w", v, ErrCorruptValue)
	}
	r.SinkIndex = d.uint16()
	r.SinkType = d.str()
	r.State = d.byte()
	r.Attempts = d.uint32()
	r.DueAt = int64(d.uint64())
	r.Size = d.uint32()
	if v >= deliveryV2 {
		r.Source = d.str()
		r.Ordered = d.bool()
		r.ReceivedAt = int64(d.uint64())
		r.LastError = d.str()
		r.DeadReason = d.str()
		r.DeadAt = int64(d.uint64())
		r.ReplayID = d.str()
	}
	if v >= deliveryVersion {
		r.History = d.history(r.LastError) // a retrying row's attempts mostly fail alike: equal errors share one string
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return DeliveryRow{}, fmt.Errorf("cannot decode delivery row: %w", d.err)
	}
	return r, nil
}

// Delivered is what the store keeps of a delivery once it is delivered (deliveries CF, key
// DeliveryKey.AppendDelivered): its delivery row is deleted by the outcome that writes it, in the same batch,
// and the record lives as long as its hook is stored (the outcome that deletes the hook writes none, and
// deletes the hook's others; the compactor and a tenant erase delete it with the hook). It is the row's
// attempt history with the final attempt appended, so a delivered hook found by id shows how it got there.
type Delivered struct {
	SinkIndex uint16 // from the key
	SinkType  string
	Attempts  uint32 // every attempt made (History keeps the last MaxHistory), the final one included
	ReplayID  string // the replay job that delivered it, if one did
	History   []Attempt
}

// deliveredVersion is the first byte of every delivered record.
const deliveredVersion = 1

// Encoding, integers big-endian, strings uvarint length + bytes:
//
//	version 1: version:8 sink_type attempts:32 replay_id, then the history as in a version 3 delivery row
//	           (count:8 and count attempts, oldest first)
//
// Errors are cut to MaxAttemptError bytes when they join a history (withAttempt), so a record holds at most
// MaxHistory × (19 + MaxAttemptError + 2) bytes of attempts; a first-attempt success is about 30 bytes.

// AppendDelivered appends the encoding of r to dst (the sink index is the key's).
func AppendDelivered(dst []byte, r *Delivered) []byte {
	dst = append(dst, deliveredVersion)
	dst = appendStr(dst, r.SinkType)
	dst = binary.BigEndian.AppendUint32(dst, r.Attempts)
	dst = appendStr(dst, r.ReplayID)
	return appendHistory(dst, r.History)
}

// DecodeDelivered decodes a delivered record of sink (its key's); the result shares no memory with b. It never
// panics.
func DecodeDelivered(sink uint16, b []byte) (Delivered, error) {
	r := Delivered{SinkIndex: sink}
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != deliveredVersion {
		return Delivered{}, fmt.Errorf("delivered record version %d: %w", v, ErrCorruptValue)
	}
	r.SinkType = d.str()
	r.Attempts = d.uint32()
	r.ReplayID = d.str()
	r.History = d.history("")
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return Delivered{}, fmt.Errorf("cannot decode delivered record: %w", d.err)
	}
	return r, nil
}

// strLike reads a length-prefixed string, returning like itself (no copy) when the bytes are equal.
func (d *decoder) strLike(like string) string {
	b := d.bytes()
	if string(b) == like {
		return like
	}
	return string(b)
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
