package store

import (
	"encoding/binary"
	"errors"
	"slices"
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

// A filter that matches few dead rows stops at MaxVisits and says where to resume; following Resume finds every
// match once, newest first.
func TestScanDeadPageStopsAtItsBudget(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var recs []*Record
	for i := range 20 {
		recs = append(recs, makeRecord(t, []string{"a", "b"}[i%2], 8, SinkBinding{Type: "http"}))
	}
	first := commit(t, db, recs...)
	for _, tenant := range []string{"a", "b"} {
		for _, c := range claim(t, db, ordOf(t, db, tenant), farFuture(), 1000, 0) {
			reason := "gave up"
			if c.Seq == first+3 || c.Seq == first+16 {
				reason = "rare"
			}
			if err := db.Bury(&c, 3, reason, 1000+int64(c.Seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var found []uint64
	var before *DeadKey
	calls := 0
	for {
		calls++
		p, err := db.ScanDeadPage(DeadFilter{Reason: "rare", MaxVisits: 4, Before: before}, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			found = append(found, e.Seq)
		}
		if p.Resume == nil {
			break
		}
		if len(p.Entries) >= 10 || calls > 10 {
			t.Fatalf("call %d: %d entries, resume %+v", calls, len(p.Entries), p.Resume)
		}
		before = p.Resume
	}
	if want := []uint64{first + 16, first + 3}; !slices.Equal(found, want) || calls != 5 {
		t.Fatalf("found %v in %d calls, want %v in 5 (20 rows, 4 a call)", found, calls, want)
	}
}
