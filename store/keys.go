package store

import (
	"encoding/binary"
	"fmt"
)

// Key layout (inventory E.2, tenant ordinals per ADR 0001). Every integer is big-endian so keys sort by it;
// times are non-negative unix milliseconds, encoded as their uint64 bits.
//
//	default CF   m:next_seq → uint64, m:store_id → id, m:format_version → uint32, m:next_ord → uint32,
//	             t:<tenant> → ord:32,
//	             c:<ord:32> → pending:64 scheduled:64 inflight:64 dead:64 pending_bytes:64 (counters.go),
//	             m:archive_pending → uint64, l:<ord:32><sink:16><source> → seq:64 until:64 (lanes.go),
//	             j:<id:128> → replay job (replay.go), u:<tenant> → live dedupe keys:64 (dedupe.go),
//	             m:quarantine_bytes, m:quarantine_count → uint64 (quarantine.go)
//	hooks CF     seq:64 → hook value (hook.go)
//	deliveries   seq:64, sink:16 → delivery row (delivery.go)
//	             seq:64, sink:16, 'D' → delivered record: a delivered sink's attempts, kept while its hook is
//	             stored (delivery.go; written by the outcome that deletes the row, deleted with the hook)
//	index CF     'd', ord:32, at_ms:64, seq:64, sink:16 → size:32             (due: pending, retry, parked)
//	             'f', ord:32, seq:64, sink:16 → size:32, due_at:64            (inflight: claimed)
//	             'x', ord:32, dead_at:64, seq:64, sink:16 → size:32           (dead: the DLQ)
//	             'a', seq:64 → size:32                                       (archive obligation)
//	             'k', seq:64 → claim ref                                     (claim marker, claims.go)
//	             'u', tenant, 0x00, len(source):16, source, key → expires_at:64, original_id:128 (dedupe key)
//	             'e', expires_at:64, tenant, 0x00, len(source):16, source, key → empty      (dedupe expiry)
//	archive CF   'S', first_seq:64 → segment row; 'I', id:128 → first_seq:64 offset:64 length:32; 'D', first_seq:64 → ids
//	             (the segment catalogue, archive.go)
//	quarantine   's', received_at:64, id:128 → summary (quarantine.go)
//	             'b', received_at:64, id:128 → whole entry: method, path, reason, hook

// Index key prefixes (the first byte of every index CF key).
const (
	IndexDue      byte = 'd'
	IndexInflight byte = 'f'
	IndexDead     byte = 'x'
	IndexArchive  byte = 'a'
	// IndexClaim prefixes the claim markers (claims.go).
	IndexClaim byte = 'k'
	// IndexDedupe and IndexDedupeExpiry prefix the dedupe index (dedupe.go).
	IndexDedupe       byte = 'u'
	IndexDedupeExpiry byte = 'e'
)

// Encoded key lengths.
const (
	HookKeyLen     = 8
	DeliveryKeyLen = 8 + 2
	DueKeyLen      = 1 + 4 + 8 + 8 + 2
	InflightKeyLen = 1 + 4 + 8 + 2
	DeadKeyLen     = DueKeyLen
	ArchiveKeyLen  = 1 + 8
	ClaimKeyLen    = 1 + 8
	IndexValueLen  = 4
	// InflightValueLen is the value of an inflight key: the size, then the due time it was claimed at.
	InflightValueLen = 4 + 8
)

// Meta keys in the default CF.
const (
	metaNextSeq       = "m:next_seq"
	metaStoreID       = "m:store_id"
	metaFormatVersion = "m:format_version"
	metaNextOrd       = "m:next_ord"
	metaArchive       = "m:archive_pending"
	tenantPrefix      = "t:"
	counterPrefix     = "c:"
	lanePrefix        = "l:"
	jobPrefix         = "j:"
	dedupeCountPrefix = "u:"
	// dedupeSourceCountPrefix holds the dedupe key count of each source.
	dedupeSourceCountPrefix = "us:"
	metaPenBytes            = "m:quarantine_bytes"
	metaPenCount            = "m:quarantine_count"
)

// FormatVersion is the on-disk format this package writes. Version 1 (no counters, no inflight or dead keys) is
// migrated on open; see migrateV1.
const FormatVersion = 2

// AppendHookKey appends the hooks CF key of seq.
func AppendHookKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, seq)
}

// ParseHookKey decodes a hooks CF key.
func ParseHookKey(k []byte) (uint64, error) {
	if len(k) != HookKeyLen {
		return 0, fmt.Errorf("hook key of %d bytes: %w", len(k), ErrBadKey)
	}
	return binary.BigEndian.Uint64(k), nil
}

// DeliveryKey addresses one delivery row: the hook's seq and the sink's index in its source's sink list.
type DeliveryKey struct {
	Seq  uint64
	Sink uint16
}

// Append appends the deliveries CF key.
func (k DeliveryKey) Append(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, k.Seq)
	return binary.BigEndian.AppendUint16(dst, k.Sink)
}

// A delivered record's key is its delivery row's key and deliveredMark, so it sorts right after that row's,
// and a hook's rows and records are one range of the deliveries CF.
const (
	deliveredMark   byte = 'D'
	DeliveredKeyLen      = DeliveryKeyLen + 1
)

// AppendDelivered appends the deliveries CF key of the delivered record of k's delivery.
func (k DeliveryKey) AppendDelivered(dst []byte) []byte {
	return append(k.Append(dst), deliveredMark)
}

// ParseDeliveredKey decodes a delivered record's key.
func ParseDeliveredKey(b []byte) (DeliveryKey, error) {
	k, ok := deliveredKeyOf(b)
	if !ok {
		return DeliveryKey{}, fmt.Errorf("delivered record key %x: %w", b, ErrBadKey)
	}
	return k, nil
}

// deliveredKeyOf decodes b when it is a delivered record's key: the walks over a hook's keys ask it of every
// delivery row's key too, so a "no" costs no error value.
func deliveredKeyOf(b []byte) (DeliveryKey, bool) {
	if len(b) != DeliveredKeyLen || b[DeliveryKeyLen] != deliveredMark {
		return DeliveryKey{}, false
	}
	return DeliveryKey{Seq: binary.BigEndian.Uint64(b), Sink: binary.BigEndian.Uint16(b[8:])}, true
}

// ParseDeliveryKey decodes a deliveries CF key.
func ParseDeliveryKey(b []byte) (DeliveryKey, error) {
	if len(b) != DeliveryKeyLen {
		return DeliveryKey{}, fmt.Errorf("delivery key of %d bytes: %w", len(b), ErrBadKey)
	}
	return DeliveryKey{Seq: binary.BigEndian.Uint64(b), Sink: binary.BigEndian.Uint16(b[8:])}, nil
}

// DueKey is an index CF key saying delivery {Seq, Sink} of tenant Ord is due at At (unix ms). Within one tenant
// the keys sort by due time, then seq, then sink.
type DueKey struct {
	Ord  uint32
	At   int64
	Seq  uint64
	Sink uint16
}

// Append appends the index CF key.
func (k DueKey) Append(dst []byte) []byte {
	dst = AppendDuePrefix(dst, k.Ord)
	dst = binary.BigEndian.AppendUint64(dst, uint64(k.At))
	dst = binary.BigEndian.AppendUint64(dst, k.Seq)
	return binary.BigEndian.AppendUint16(dst, k.Sink)
}

// AppendDuePrefix appends the prefix shared by every due key of tenant ord (a per-tenant scan seeks to it).
func AppendDuePrefix(dst []byte, ord uint32) []byte {
	dst = append(dst, IndexDue)
	return binary.BigEndian.AppendUint32(dst, ord)
}

// ParseDueKey decodes a due key.
func ParseDueKey(b []byte) (DueKey, error) {
	if len(b) != DueKeyLen || b[0] != IndexDue {
		return DueKey{}, fmt.Errorf("due key %x: %w", b, ErrBadKey)
	}
	return DueKey{
		Ord:  binary.BigEndian.Uint32(b[1:]),
		At:   int64(binary.BigEndian.Uint64(b[5:])),
		Seq:  binary.BigEndian.Uint64(b[13:]),
		Sink: binary.BigEndian.Uint16(b[21:]),
	}, nil
}

// InflightKey is an index CF key saying delivery {Seq, Sink} of tenant Ord is claimed by dispatch.
type InflightKey struct {
	Ord  uint32
	Seq  uint64
	Sink uint16
}

// Append appends the index CF key.
func (k InflightKey) Append(dst []byte) []byte {
	dst = append(dst, IndexInflight)
	dst = binary.BigEndian.AppendUint32(dst, k.Ord)
	dst = binary.BigEndian.AppendUint64(dst, k.Seq)
	return binary.BigEndian.AppendUint16(dst, k.Sink)
}

// ParseInflightKey decodes an inflight key.
func ParseInflightKey(b []byte) (InflightKey, error) {
	if len(b) != InflightKeyLen || b[0] != IndexInflight {
		return InflightKey{}, fmt.Errorf("inflight key %x: %w", b, ErrBadKey)
	}
	return InflightKey{
		Ord:  binary.BigEndian.Uint32(b[1:]),
		Seq:  binary.BigEndian.Uint64(b[5:]),
		Sink: binary.BigEndian.Uint16(b[13:]),
	}, nil
}

// DeadKey is an index CF key saying delivery {Seq, Sink} of tenant Ord was dead-lettered at At (unix ms).
// Within one tenant the keys sort by time of death.
type DeadKey struct {
	Ord  uint32
	At   int64
	Seq  uint64
	Sink uint16
}

// Append appends the index CF key.
func (k DeadKey) Append(dst []byte) []byte {
	dst = AppendDeadPrefix(dst, k.Ord)
	dst = binary.BigEndian.AppendUint64(dst, uint64(k.At))
	dst = binary.BigEndian.AppendUint64(dst, k.Seq)
	return binary.BigEndian.AppendUint16(dst, k.Sink)
}

// AppendDeadPrefix appends the prefix shared by every dead key of tenant ord.
func AppendDeadPrefix(dst []byte, ord uint32) []byte {
	dst = append(dst, IndexDead)
	return binary.BigEndian.AppendUint32(dst, ord)
}

// ParseDeadKey decodes a dead key.
func ParseDeadKey(b []byte) (DeadKey, error) {
	if len(b) != DeadKeyLen || b[0] != IndexDead {
		return DeadKey{}, fmt.Errorf("dead key %x: %w", b, ErrBadKey)
	}
	return DeadKey{
		Ord:  binary.BigEndian.Uint32(b[1:]),
		At:   int64(binary.BigEndian.Uint64(b[5:])),
		Seq:  binary.BigEndian.Uint64(b[13:]),
		Sink: binary.BigEndian.Uint16(b[21:]),
	}, nil
}

// AppendInflightValue appends the value of an inflight key.
func AppendInflightValue(dst []byte, size uint32, dueAt int64) []byte {
	dst = binary.BigEndian.AppendUint32(dst, size)
	return binary.BigEndian.AppendUint64(dst, uint64(dueAt))
}

// ParseInflightValue decodes the value of an inflight key.
func ParseInflightValue(b []byte) (size uint32, dueAt int64, err error) {
	if len(b) != InflightValueLen {
		return 0, 0, fmt.Errorf("inflight value of %d bytes: %w", len(b), ErrCorruptValue)
	}
	return binary.BigEndian.Uint32(b), int64(binary.BigEndian.Uint64(b[4:])), nil
}

// AppendArchiveKey appends the archive obligation key of seq.
func AppendArchiveKey(dst []byte, seq uint64) []byte {
	dst = append(dst, IndexArchive)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// ParseArchiveKey decodes an archive obligation key.
func ParseArchiveKey(b []byte) (uint64, error) {
	if len(b) != ArchiveKeyLen || b[0] != IndexArchive {
		return 0, fmt.Errorf("archive key %x: %w", b, ErrBadKey)
	}
	return binary.BigEndian.Uint64(b[1:]), nil
}

// AppendIndexValue appends the value of a due, dead or archive key: the hook's stored size, so windows bounded by
// bytes can be charged without reading the hook.
func AppendIndexValue(dst []byte, size uint32) []byte {
	return binary.BigEndian.AppendUint32(dst, size)
}

// ParseIndexValue decodes the value of a due, dead or archive key.
func ParseIndexValue(b []byte) (uint32, error) {
	if len(b) != IndexValueLen {
		return 0, fmt.Errorf("index value of %d bytes: %w", len(b), ErrCorruptValue)
	}
	return binary.BigEndian.Uint32(b), nil
}

// appendTenantKey appends the default CF key holding tenant's ordinal.
func appendTenantKey(dst []byte, tenant string) []byte {
	dst = append(dst, tenantPrefix...)
	return append(dst, tenant...)
}

// appendCounterKey appends the default CF key holding tenant ord's counters.
func appendCounterKey(dst []byte, ord uint32) []byte {
	dst = append(dst, counterPrefix...)
	return binary.BigEndian.AppendUint32(dst, ord)
}
