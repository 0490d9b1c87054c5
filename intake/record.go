package intake

import (
	"encoding/binary"
	"fmt"
)

// Record format (docs/intake.md). Every record starts with the magic and its version.
const (
	magic = "AKI"
	// Version1 is the record version this package writes.
	Version1 = 1
	// KindHooks is a record holding hook entries; KindProbe holds none (an open breaker's probe).
	KindHooks = 1
	KindProbe = 2
)

// Entry is one hook in a record: its seq on the node that committed it, its id and its store entry
// (store.AppendEntry: everything needed to commit it again).
type Entry struct {
	Seq   uint64
	ID    [16]byte
	Bytes []byte
}

// Record is a decoded log record.
type Record struct {
	Version     byte
	Kind        byte
	Node        string
	First, Last uint64 // seq range of its entries (0, 0 for a probe)
	Entries     []Entry
}

// AppendRecord appends the v1 encoding of a record of node holding entries (kind KindHooks; none: a probe).
func AppendRecord(dst []byte, node string, entries []Entry) []byte {
	kind := byte(KindHooks)
	var first, last uint64
	if len(entries) == 0 {
		kind = KindProbe
	} else {
		first, last = entries[0].Seq, entries[0].Seq
		for _, e := range entries {
			first, last = min(first, e.Seq), max(last, e.Seq)
		}
	}
	dst = append(dst, magic...)
	dst = append(dst, Version1, kind)
	dst = binary.AppendUvarint(dst, uint64(len(node)))
	dst = append(dst, node...)
	dst = binary.BigEndian.AppendUint64(dst, first)
	dst = binary.BigEndian.AppendUint64(dst, last)
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, e.Seq)
		dst = append(dst, e.ID[:]...)
	}
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(len(e.Bytes)))
		dst = append(dst, e.Bytes...)
	}
	return dst
}

// recordSize is the size of AppendRecord's output without the entries.
func recordSize(node string) int {
	return len(magic) + 2 + binary.MaxVarintLen64 + len(node) + 16 + binary.MaxVarintLen64
}

// entrySize is what one entry adds to a record.
func entrySize(e Entry) int { return 24 + binary.MaxVarintLen64 + len(e.Bytes) }

// DecodeRecord decodes a record; its entries' bytes are copies.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	bad := func(what string) (Record, error) {
		return Record{}, fmt.Errorf("%w: %s", ErrCorruptRecord, what)
	}
	if len(b) < len(magic)+2 || string(b[:len(magic)]) != magic {
		return bad("no magic")
	}
	r.Version, r.Kind = b[3], b[4]
	if r.Version != Version1 {
		return bad(fmt.Sprintf("version %d", r.Version))
	}
	b = b[5:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return bad("node")
	}
	r.Node = string(b[k : k+int(n)])
	b = b[k+int(n):]
	if len(b) < 16 {
		return bad("seq range")
	}
	r.First, r.Last = binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
	b = b[16:]
	count, k := binary.Uvarint(b)
	if k <= 0 || count > uint64(len(b))/24 {
		return bad("entry count")
	}
	b = b[k:]
	r.Entries = make([]Entry, count)
	for i := range r.Entries {
		r.Entries[i].Seq = binary.BigEndian.Uint64(b)
		copy(r.Entries[i].ID[:], b[8:24])
		b = b[24:]
	}
	for i := range r.Entries {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return bad("entry bytes")
		}
		r.Entries[i].Bytes = append([]byte(nil), b[k:k+int(n)]...)
		b = b[k+int(n):]
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	if r.Kind != KindHooks && r.Kind != KindProbe {
		return bad(fmt.Sprintf("kind %d", r.Kind))
	}
	return r, nil
}
