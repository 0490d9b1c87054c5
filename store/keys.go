package store

import (
	"encoding/binary"
	"fmt"
)

// Key layout (inventory E.2, tenant ordinals per ADR 0001). Every integer is big-endian so keys sort by it;
// times are non-negative unix milliseconds, encoded as their uint64 bits.
//
//	default CF   m:next_seq → uint64, m:store_id → id, m:format_version → uint32, m:next_ord → uint32,
//	             t:<tenant> → ord:32
//	hooks CF     seq:64 → hook value (hook.go)
//	deliveries   seq:64, sink:16 → delivery row (delivery.go)
//	index CF     'd', ord:32, at_ms:64, seq:64, sink:16 → size:32   (due: pending and retry)
//	             'a', seq:64 → size:32                            (archive obligation)

// Index key prefixes (the first byte of every index CF key).
const (
	IndexDue     byte = 'd'
	IndexArchive byte = 'a'
)

// Encoded key lengths.
const (
	HookKeyLen     = 8
	DeliveryKeyLen = 8 + 2
	DueKeyLen      = 1 + 4 + 8 + 8 + 2
	ArchiveKeyLen  = 1 + 8
	IndexValueLen  = 4
)

// Meta keys in the default CF.
const (
	metaNextSeq       = "m:next_seq"
	metaStoreID       = "m:store_id"
	metaFormatVersion = "m:format_version"
	metaNextOrd       = "m:next_ord"
	tenantPrefix      = "t:"
)

// FormatVersion is the on-disk format this package reads and writes.
const FormatVersion = 1

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

// AppendIndexValue appends the value of a due or archive key: the hook's stored size, so windows bounded by
// bytes can be charged without reading the hook.
func AppendIndexValue(dst []byte, size uint32) []byte {
	return binary.BigEndian.AppendUint32(dst, size)
}

// ParseIndexValue decodes the value of a due or archive key.
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
