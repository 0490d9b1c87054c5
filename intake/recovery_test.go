package intake_test

import (
	"context"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/intake"
	"github.com/ankusa-go/ankusa/store"
)

// TestRecoveryReplaysWithOneRuleDuplicateAndReorderedChangeNothing proves the recovery rule (design: "Boot
// recovery replays the log from m:intake_offset through one seq-and-hook-id rule (a duplicate or reordered
// record changes nothing)"): a node on an empty store replays its records — one of them reordered behind a
// later one, one published twice, a foreign node's and a corrupt one in between — and ends with each of its
// hooks once, at its original seq, with its delivery row and dedupe key; a second replay applies nothing.
func TestRecoveryReplaysWithOneRuleDuplicateAndReorderedChangeNothing(t *testing.T) {
	brokers := newCluster(t)
	l := newLog(t, brokers, "node-a")
	recs := make([]*store.Record, 6)
	for i := range recs {
		recs[i] = record(t, i)
	}
	publish(t, l, entry(recs[0], 1), entry(recs[1], 2))
	publish(t, l, entry(recs[3], 4), entry(recs[4], 5)) // seq 3 comes later: reordered
	produceRaw(t, brokers, "node-a", []byte("not a record"))
	publish(t, l, entry(recs[2], 3))
	publish(t, l, entry(recs[0], 1), entry(recs[1], 2)) // a duplicate record
	foreign := newLog(t, brokers, "node-b")
	publish(t, foreign, entry(recs[5], 6))

	db := openStore(t, nil)
	d := newDual(t, db, l, "node-a")
	if !d.Recovering() {
		t.Fatal("a new Dual must refuse commits until recovery is done")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if d.Recovering() {
		t.Fatal("still recovering after Recover")
	}
	got := hooks(t, db)
	if len(got) != 5 {
		t.Fatalf("replay stored %d hooks, want 5 (node-a's, each once): %v", len(got), got)
	}
	for i := range 5 {
		if got[uint64(i+1)] != recs[i].ID {
			t.Fatalf("seq %d holds %x, want %x", i+1, got[uint64(i+1)], recs[i].ID)
		}
	}
	if next := db.NextSeq(); next != 6 {
		t.Fatalf("next seq %d after the replay, want 6", next)
	}
	rows := 0
	if err := db.ForEachDelivery(func(uint64, store.DeliveryRow) error { rows++; return nil }); err != nil {
		t.Fatal(err)
	}
	if rows != 5 {
		t.Fatalf("%d delivery rows, want 5", rows)
	}
	if id, ok, err := db.LookupDedupe("t1", "src", recs[2].DedupeKey, time.Now()); err != nil || !ok || id != recs[2].ID {
		t.Fatalf("dedupe key of the reordered hook: %x %v %v", id, ok, err)
	}
	raw, err := db.IntakeWatermark()
	if err != nil || raw == nil {
		t.Fatalf("watermark: %v %v", raw, err)
	}
	wm, err := intake.DecodeWatermark(raw)
	if err != nil || wm.Seq != 6 {
		t.Fatalf("watermark %+v %v, want seq 6", wm, err)
	}
	t.Logf("replayed: 5 hooks at seqs 1..5 from 7 records (1 reordered, 1 duplicate, 1 foreign, 1 corrupt); watermark seq %d offsets %v", wm.Seq, wm.Offsets)

	// The same replay from the start again (a lost watermark) changes nothing.
	d2 := newDual(t, db, l, "node-a")
	if err := db.SyncIntakeWatermark(intake.AppendWatermark(nil, intake.Watermark{}), nil); err != nil {
		t.Fatal(err)
	}
	if err := d2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if again := hooks(t, db); len(again) != 5 || db.NextSeq() != 6 {
		t.Fatalf("a second replay changed the store: %d hooks, next seq %d", len(again), db.NextSeq())
	}
}

// TestRecoveryRepublishesLocalHooksAboveTheWatermark proves the second step of recovery (design: "republishes
// the local hooks above the watermark"): hooks synced here whose confirm never came (their pending keys, as a
// kill between the two halves leaves them) are in the log after recovery and their pending keys are gone.
func TestRecoveryRepublishesLocalHooksAboveTheWatermark(t *testing.T) {
	brokers := newCluster(t)
	l := newLog(t, brokers, "node-a")
	db := openStore(t, nil)
	recs := []*store.Record{record(t, 0), record(t, 1), record(t, 2)}
	if _, err := db.CommitHooksWith(recs, store.CommitExtra{Pending: true}); err != nil {
		t.Fatal(err)
	}
	pending := 0
	_ = db.ForEachIntakePending(func(uint64, *store.Record) error { pending++; return nil })
	if pending != 3 {
		t.Fatalf("%d pending keys after the commit, want 3", pending)
	}
	d := newDual(t, db, l, "node-a")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	pending = 0
	_ = db.ForEachIntakePending(func(uint64, *store.Record) error { pending++; return nil })
	if pending != 0 {
		t.Fatalf("%d pending keys after recovery, want 0", pending)
	}
	logged := map[[16]byte]bool{}
	if _, err := l.Read(ctx, nil, func(_ int32, _ int64, v []byte) error {
		r, err := intake.DecodeRecord(v)
		if err != nil {
			return err
		}
		for _, e := range r.Entries {
			logged[e.ID] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if !logged[r.ID] {
			t.Fatalf("local hook %x above the watermark was not republished", r.ID)
		}
	}
	t.Logf("3 local hooks above the watermark republished, pending keys cleared")
}
