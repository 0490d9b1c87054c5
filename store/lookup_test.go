package store

import (
	"encoding/binary"
	"errors"
	"testing"
)

// v7 stamps id with the receipt time ms as a UUIDv7 does (its first 48 bits).
func v7(id [16]byte, ms int64) [16]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ms))
	copy(id[:6], b[2:])
	return id
}

func stamped(t *testing.T, at int64) *Record {
	r := makeRecord(t, "acme", 16, SinkBinding{Index: 0, Type: "http"})
	h, err := DecodeHook(r.Value)
	if err != nil {
		t.Fatal(err)
	}
	h.ID, h.ReceivedAt = v7(h.ID, at), at
	r.ID, r.ReceivedAt, r.Value = h.ID, at, AppendHook(nil, &h)
	return r
}

// FindHook finds a hook by id among many (by its time, then a short walk), one committed long after its receipt
// (a released hook: found by the whole scan), with its delivery rows; an id never stored is ErrNotFound.
func TestFindHook(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	base := int64(1_764_000_000_000)
	var recs []*Record
	for i := range 2000 {
		recs = append(recs, stamped(t, base+int64(i)*1000)) // one a second: the window holds ~120
	}
	for i := 0; i < len(recs); i += 500 {
		if _, err := db.CommitHooks(recs[i:min(i+500, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}
	late := stamped(t, base-86_400_000) // received a day before the others, committed after them
	if _, err := db.CommitHooks([]*Record{late}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Record{recs[0], recs[1234], recs[len(recs)-1], late} {
		got, err := db.FindHook(r.ID)
		if err != nil {
			t.Fatalf("FindHook(%x): %v", r.ID, err)
		}
		if got.Hook.ID != r.ID || got.Hook.ReceivedAt != r.ReceivedAt || len(got.Rows) != 1 || got.Rows[0].SinkType != "http" {
			t.Fatalf("FindHook(%x) = seq %d hook %x at %d rows %+v", r.ID, got.Seq, got.Hook.ID, got.Hook.ReceivedAt, got.Rows)
		}
	}
	if _, err := db.FindHook(v7(newID(), base+5000)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an id never stored: %v, want ErrNotFound", err)
	}
}
