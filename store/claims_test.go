package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const testRef = "urn:ankusa:claim:v1:t1:01J9ZQ5K8E6VX2W4Y3T1R0P9M0"

func wantClaimRef(t *testing.T, db *DB, seq uint64, want string) {
	t.Helper()
	ref, ok, err := db.ClaimRef(seq)
	if err != nil {
		t.Fatalf("ClaimRef(%d): %v", seq, err)
	}
	if want == "" && ok {
		t.Fatalf("ClaimRef(%d) = %q, want none", seq, ref)
	}
	if want != "" && (!ok || ref != want) {
		t.Fatalf("ClaimRef(%d) = %q, %v; want %q", seq, ref, ok, want)
	}
}

func claimMarkers(t *testing.T, db *DB) int {
	t.Helper()
	n, err := db.CountIndex(IndexClaim)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestClaimKeyRoundTrip(t *testing.T) {
	k := AppendClaimKey(nil, 0x0102030405060708)
	if len(k) != ClaimKeyLen || k[0] != IndexClaim {
		t.Fatalf("key %x", k)
	}
	if seq, err := ParseClaimKey(k); err != nil || seq != 0x0102030405060708 {
		t.Fatalf("ParseClaimKey = %x, %v", seq, err)
	}
	for _, bad := range [][]byte{k[:8], append(k[:ClaimKeyLen:ClaimKeyLen], 0), AppendArchiveKey(nil, 1)} {
		if _, err := ParseClaimKey(bad); !errors.Is(err, ErrBadKey) {
			t.Fatalf("ParseClaimKey(%x) = %v, want ErrBadKey", bad, err)
		}
	}
}

// Inventory D.5: the ref is handed "to every sink and every retry": one marker per hook, read by every row of it,
// and still there after the store is reopened.
func TestClaimMarkerSharedByTheHooksRowsAndKeptAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	r := makeRecord(t, "t1", 100, SinkBinding{Index: 0, Type: "nats"}, SinkBinding{Index: 1, Type: "redis"})
	seq := commit(t, db, r)
	wantClaimRef(t, db, seq, "")
	if err := db.PutClaimRef(seq, testRef); err != nil {
		t.Fatal(err)
	}
	wantClaimRef(t, db, seq, testRef)
	wantClaimRef(t, db, seq+1, "")
	for _, bad := range []string{"", strings.Repeat("x", MaxClaimRefLen+1)} {
		if err := db.PutClaimRef(seq, bad); err == nil {
			t.Fatalf("PutClaimRef(%d bytes) accepted", len(bad))
		}
	}
	wantClaimRef(t, db, seq, testRef)
	// The marker is not a delivery row: the counters still equal what the index holds.
	requireExactCounters(t, db)

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	wantClaimRef(t, db, seq, testRef)
}

// Design: the claim marker is "reclaimed with the hook". Rows completing one by one keep it until the last; the
// batch that deletes the hook deletes it; a hook already gone takes no marker.
func TestClaimMarkerReclaimedWithTheHook(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	r := makeRecord(t, "t1", 100, SinkBinding{Index: 0, Type: "nats"}, SinkBinding{Index: 1, Type: "redis"})
	seq := commit(t, db, r)
	if err := db.PutClaimRef(seq, testRef); err != nil {
		t.Fatal(err)
	}
	cs := claim(t, db, ordOf(t, db, "t1"), time.Now().Add(time.Hour).UnixMilli(), 10, 0)
	if len(cs) != 2 {
		t.Fatalf("claimed %d rows, want 2", len(cs))
	}
	if err := db.Complete(&cs[0]); err != nil {
		t.Fatal(err)
	}
	wantClaimRef(t, db, seq, testRef) // the other sink still needs it
	if err := db.Complete(&cs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetHook(seq); !errors.Is(err, ErrNotFound) {
		t.Fatalf("hook kept: %v", err)
	}
	wantClaimRef(t, db, seq, "")
	if n := claimMarkers(t, db); n != 0 {
		t.Fatalf("%d claim markers left", n)
	}
	if err := db.PutClaimRef(seq, testRef); !errors.Is(err, ErrNotFound) {
		t.Fatalf("PutClaimRef on a reclaimed hook = %v, want ErrNotFound", err)
	}
	if n := claimMarkers(t, db); n != 0 {
		t.Fatalf("a refused put left %d claim markers", n)
	}
}

// Dead rows keep the hook (inventory E.3), so they keep its marker: a replay redelivers under the same claim.
// The archive obligation holds the hook after its rows complete; cataloguing it reclaims hook and marker.
func TestClaimMarkerKeptByDeadRowsAndTheArchive(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	dead := makeRecord(t, "t1", 100, SinkBinding{Index: 0, Type: "nats"})
	archived := makeRecord(t, "t1", 100, SinkBinding{Index: 0, Type: "nats"})
	seqs := commitArchived(t, db, dead, archived)
	for _, seq := range seqs {
		if err := db.PutClaimRef(seq, testRef); err != nil {
			t.Fatal(err)
		}
	}
	cs := claim(t, db, ordOf(t, db, "t1"), time.Now().Add(time.Hour).UnixMilli(), 10, 0)
	if len(cs) != 2 || cs[0].Seq != seqs[0] {
		t.Fatalf("claimed %+v", cs)
	}
	if err := db.Bury(&cs[0], 1, "test", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if err := db.Complete(&cs[1]); err != nil {
		t.Fatal(err)
	}
	wantClaimRef(t, db, seqs[1], testRef) // the archive obligation still holds the hook
	obs, _, err := db.Obligations(0, 1<<20, 0, 100, nil)
	if err != nil || len(obs) != 2 {
		t.Fatalf("Obligations = %d, %v", len(obs), err)
	}
	catalogue(t, db, obs, 1)
	wantClaimRef(t, db, seqs[0], testRef)
	wantClaimRef(t, db, seqs[1], "")
	if n := claimMarkers(t, db); n != 1 {
		t.Fatalf("%d claim markers, want the dead hook's only", n)
	}
}

// The store knows which hooks have a marker from what it finds at open: a marker recorded before a restart is
// still deleted with its hook after it (an outcome deletes a marker only where the store knows of one).
func TestClaimMarkerReclaimedAfterReopen(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	marked := makeRecord(t, "t1", 100, SinkBinding{Index: 0, Type: "nats"})
	plain := makeRecord(t, "t1", 100, SinkBinding{Index: 0, Type: "nats"})
	seq := commit(t, db, marked)
	commit(t, db, plain)
	if err := db.PutClaimRef(seq, testRef); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	wantClaimRef(t, db, seq, testRef)
	cs := claim(t, db, ordOf(t, db, "t1"), time.Now().Add(time.Hour).UnixMilli(), 10, 0)
	if len(cs) != 2 {
		t.Fatalf("claimed %d rows, want 2", len(cs))
	}
	for i := range cs {
		if err := db.Complete(&cs[i]); err != nil {
			t.Fatal(err)
		}
	}
	wantClaimRef(t, db, seq, "")
	if n := claimMarkers(t, db); n != 0 {
		t.Fatalf("%d claim markers left", n)
	}
	requireExactCounters(t, db)
}
