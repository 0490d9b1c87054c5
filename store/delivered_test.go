package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// deliveredKeys lists every delivered record key of the store as seq/sink (tests look for orphans).
func deliveredKeys(t *testing.T, db *DB) map[DeliveryKey]bool {
	t.Helper()
	out := make(map[DeliveryKey]bool)
	if err := db.ForEachKey(func(cf string, k, _ []byte) error {
		if cf == "deliveries" {
			if dk, err := ParseDeliveredKey(k); err == nil {
				out[dk] = true
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// deliverAll claims every due row of tenant and completes each with a 200 attempt, in one outcome group each.
func deliverAll(t *testing.T, db *DB, tenant string, sinks ...uint16) {
	t.Helper()
	for _, c := range claim(t, db, ordOf(t, db, tenant), farFuture(), 1<<16, 0) {
		if len(sinks) > 0 && !containsSink(sinks, c.Sink) {
			if err := db.Reschedule(&c, c.Row.Attempts, farFuture()+time.Hour.Milliseconds(), "later"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		c.Last = Attempt{Number: c.Row.Attempts + 1, StartedAt: 1000, LatencyUS: 900, Class: AttemptOK, Status: 200}
		if err := db.Complete(&c); err != nil {
			t.Fatal(err)
		}
	}
}

func containsSink(ss []uint16, s uint16) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestDeliveredRecordCodec(t *testing.T) {
	r := Delivered{SinkIndex: 3, SinkType: "http", Attempts: 12, ReplayID: "job-1", History: []Attempt{
		{Number: 11, StartedAt: 5, LatencyUS: 7, Class: AttemptTransient, Status: 503, Error: "refused"},
		{Number: 12, StartedAt: 9, LatencyUS: 800, Class: AttemptOK, Status: 204}}}
	b := AppendDelivered(nil, &r)
	got, err := DecodeDelivered(3, b)
	if err != nil || got.SinkType != r.SinkType || got.Attempts != 12 || got.ReplayID != "job-1" || len(got.History) != 2 ||
		got.History[0] != r.History[0] || got.History[1] != r.History[1] || got.SinkIndex != 3 {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for n := range b {
		if _, err := DecodeDelivered(0, b[:n]); !errors.Is(err, ErrCorruptValue) {
			t.Fatalf("a record cut to %d bytes: %v", n, err)
		}
	}
	if _, err := DecodeDelivered(0, append(b, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
	if k, err := ParseDeliveredKey(DeliveryKey{Seq: 7, Sink: 2}.AppendDelivered(nil)); err != nil || k != (DeliveryKey{Seq: 7, Sink: 2}) {
		t.Fatalf("key round trip: %+v, %v", k, err)
	}
	if _, err := ParseDeliveredKey(DeliveryKey{Seq: 7, Sink: 2}.Append(nil)); err == nil {
		t.Fatal("a delivery row's key parsed as a delivered record's")
	}
}

// The outcome that completes a delivery whose hook stays (an archive obligation holds it) replaces the row with
// the delivered record in its own batch: the row's history with the final attempt, its error cut; FindHook
// returns it, and a refused outcome (not claimed) writes none.
func TestCompleteKeepsTheAttemptsOfADeliveredSink(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	rec := makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http"})
	commitArchived(t, db, rec)
	ord := ordOf(t, db, "acme")
	c := claim(t, db, ord, farFuture(), 1, 0)[0]
	long := strings.Repeat("é", MaxAttemptError) // 2 bytes each: cut at a rune boundary
	c.Last = Attempt{Number: 1, StartedAt: 100, LatencyUS: 30_000, Class: AttemptTransient, Status: 503, Error: long}
	if err := db.Reschedule(&c, 1, 1, "refused"); err != nil {
		t.Fatal(err)
	}
	c = claim(t, db, ord, farFuture(), 1, 0)[0]
	c.Last = Attempt{Number: 2, StartedAt: 200, LatencyUS: 850, Class: AttemptOK, Status: 200}
	if err := db.Complete(&c); err != nil {
		t.Fatal(err)
	}
	f, err := db.FindHook(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rows) != 0 || len(f.Delivered) != 1 {
		t.Fatalf("rows %+v, delivered %+v: want the row replaced by its record", f.Rows, f.Delivered)
	}
	d := f.Delivered[0]
	if d.SinkIndex != 0 || d.SinkType != "http" || d.Attempts != 2 || len(d.History) != 2 {
		t.Fatalf("record %+v", d)
	}
	if h := d.History[1]; h != c.Last {
		t.Fatalf("final attempt %+v, want %+v", h, c.Last)
	}
	if h := d.History[0]; h.Status != 503 || len(h.Error) > MaxAttemptError || !strings.HasPrefix(long, h.Error) || len(h.Error) < MaxAttemptError-1 {
		t.Fatalf("first attempt %+v (error of %d bytes)", h, len(h.Error))
	}
	if err := db.Complete(&c); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("a second Complete: %v", err)
	}
	if f, _ := db.FindHook(rec.ID); len(f.Delivered) != 1 || f.Delivered[0].History[1] != c.Last {
		t.Fatalf("after a refused outcome: %+v", f.Delivered)
	}
	if n := len(deliveredKeys(t, db)); n != 1 {
		t.Fatalf("%d records", n)
	}
	requireExactCounters(t, db)
}

// Without an archive obligation the hook goes with its last row, and so does every record of it: the one
// written by an earlier group is deleted, and one of the same group (two sinks settled together) is never
// written, so no record outlives its hook. A single-sink hook gets no record at all.
func TestOutcomeThatDeletesTheHookDeletesItsRecords(t *testing.T) {
	two := []SinkBinding{{Index: 0, Type: "http"}, {Index: 1, Type: "log"}}
	t.Run("EarlierGroup", func(t *testing.T) {
		db := openTest(t, t.TempDir(), nil)
		rec := makeRecord(t, "acme", 8, two...)
		commit(t, db, rec)
		deliverAll(t, db, "acme", 0)
		f, err := db.FindHook(rec.ID)
		if err != nil || len(f.Rows) != 1 || len(f.Delivered) != 1 || f.Delivered[0].SinkIndex != 0 {
			t.Fatalf("after sink 0: rows %+v delivered %+v, %v", f.Rows, f.Delivered, err)
		}
		c := claim(t, db, ordOf(t, db, "acme"), farFuture()+2*time.Hour.Milliseconds(), 1, 0)[0]
		if err := db.Complete(&c); err != nil {
			t.Fatal(err)
		}
		if _, err := db.FindHook(rec.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("hook after its last sink: %v", err)
		}
		if k := deliveredKeys(t, db); len(k) != 0 {
			t.Fatalf("records left: %v", k)
		}
	})
	t.Run("SameGroup", func(t *testing.T) {
		db := openTest(t, t.TempDir(), nil)
		rec := makeRecord(t, "acme", 8, two...)
		commit(t, db, rec)
		cs := claim(t, db, ordOf(t, db, "acme"), farFuture(), 2, 0)
		errs := queueUnderHeldLock(t, db, func() error { return db.Complete(&cs[0]) }, func() error { return db.Complete(&cs[1]) })
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		if _, err := db.FindHook(rec.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("hook after both sinks: %v", err)
		}
		if k := deliveredKeys(t, db); len(k) != 0 {
			t.Fatalf("records left: %v", k)
		}
	})
	t.Run("OneSink", func(t *testing.T) {
		db := openTest(t, t.TempDir(), nil)
		commit(t, db, makeRecords(t, 3, "acme")...)
		deliverAll(t, db, "acme")
		if k := deliveredKeys(t, db); len(k) != 0 {
			t.Fatalf("records of deleted hooks: %v", k)
		}
	})
}

// Cataloguing a segment deletes every hook the obligation was the last thing holding, and their records with
// them (a run of minDeleteRun or more as one range deletion, fewer one by one); a hook that still has a
// row keeps its records, and its row.
func TestCatalogueDeletesTheRecordsWithTheirHooks(t *testing.T) {
	for _, n := range []int{3, minDeleteRun + 5} {
		db := openTest(t, t.TempDir(), nil)
		var recs []*Record
		for range n {
			recs = append(recs, makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http"}, SinkBinding{Index: 1, Type: "http"}))
		}
		seqs := commitArchived(t, db, recs...)
		// Every hook delivered to both sinks but the last, which waits for sink 1.
		deliverAll(t, db, "acme", 0)
		for _, c := range claim(t, db, ordOf(t, db, "acme"), farFuture()+2*time.Hour.Milliseconds(), 1<<16, 0) {
			if c.Seq == seqs[n-1] {
				continue // stays claimed: its row holds the hook
			}
			if err := db.Complete(&c); err != nil {
				t.Fatal(err)
			}
		}
		if k := deliveredKeys(t, db); len(k) != 2*n-1 {
			t.Fatalf("n=%d: %d records before the catalogue, want %d", n, len(k), 2*n-1)
		}
		obs, _, err := db.Obligations(0, 1<<20, 0, 1<<16, nil)
		if err != nil || len(obs) != n {
			t.Fatalf("obligations %d, %v", len(obs), err)
		}
		catalogue(t, db, obs, 1)
		left := deliveredKeys(t, db)
		if len(left) != 1 || !left[DeliveryKey{Seq: seqs[n-1], Sink: 0}] {
			t.Fatalf("n=%d: records after the catalogue %v, want only the waiting hook's", n, left)
		}
		f, err := db.FindHook(recs[n-1].ID)
		if err != nil || len(f.Rows) != 1 || len(f.Delivered) != 1 {
			t.Fatalf("n=%d: the waiting hook: %+v, %v", n, f, err)
		}
		for _, r := range recs[:n-1] {
			if _, err := db.FindHook(r.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("n=%d: a catalogued delivered hook: %v", n, err)
			}
		}
	}
}

// A tenant erase removes its hooks' records with them, and counts them apart from the rows; another tenant's
// stay.
func TestEraseRemovesTheTenantsRecords(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	two := []SinkBinding{{Index: 0, Type: "http"}, {Index: 1, Type: "http"}}
	acme := []*Record{makeRecord(t, "acme", 8, two...), makeRecord(t, "acme", 8, two...)}
	globex := makeRecord(t, "globex", 8, two...)
	commitArchived(t, db, append(acme, globex)...)
	deliverAll(t, db, "acme", 0)
	deliverAll(t, db, "globex")
	if n := len(deliveredKeys(t, db)); n != 4 {
		t.Fatalf("%d records before the erase, want 4", n)
	}
	x, err := db.EraseTenantRows("acme")
	if err != nil {
		t.Fatal(err)
	}
	if x.Hooks != 2 || x.Delivered != 2 || x.Deliveries != 2 {
		t.Fatalf("erased %+v: want 2 hooks, 2 records, 2 rows", x)
	}
	left := deliveredKeys(t, db)
	f, err := db.FindHook(globex.ID)
	if err != nil || len(f.Delivered) != 2 || len(left) != 2 {
		t.Fatalf("globex after acme's erase: %+v, %v; records %v", f.Delivered, err, left)
	}
	requireExactCounters(t, db)
}
