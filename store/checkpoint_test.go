package store

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCheckpointHoldsEveryCommitBeforeItWhileWritesGoOn proves the backup's premise (design: "every
// backup.interval_ms a checkpoint of the store goes to an object store"): a checkpoint taken while commits run
// opens as a store of its own, with the same store id, holding every hook whose commit returned before the
// checkpoint started.
func TestCheckpointHoldsEveryCommitBeforeItWhileWritesGoOn(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, filepath.Join(dir, "store"), nil)

	var committed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.CommitHooks([]*Record{makeRecord(t, "t1", 256, SinkBinding{Index: 0, Type: "http"})}); err != nil {
				errs <- err
				return
			}
			committed.Add(1)
		}
	}()
	for committed.Load() < 50 {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}
	before := committed.Load()
	cp := filepath.Join(dir, "cp")
	if err := db.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	held, err := HoldsDatabase(cp)
	if err != nil || !held {
		t.Fatalf("HoldsDatabase(checkpoint) = %v, %v; want true", held, err)
	}
	copyDB := openTest(t, cp, nil)
	if copyDB.StoreID() != db.StoreID() {
		t.Fatalf("checkpoint store id %q, want %q", copyDB.StoreID(), db.StoreID())
	}
	n := 0
	if err := copyDB.ForEachHook(func(uint64, *Hook) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if int64(n) < before {
		t.Fatalf("checkpoint holds %d hooks; %d commits had returned before it", n, before)
	}
	t.Logf("hooks committed before the checkpoint: %d; in it: %d; after the run: %d", before, n, committed.Load())
}

func TestHoldsDatabase(t *testing.T) {
	dir := t.TempDir()
	if held, err := HoldsDatabase(filepath.Join(dir, "missing")); err != nil || held {
		t.Fatalf("missing dir: %v, %v", held, err)
	}
	if held, err := HoldsDatabase(dir); err != nil || held {
		t.Fatalf("empty dir: %v, %v", held, err)
	}
	db := openTest(t, filepath.Join(dir, "s"), nil)
	_ = db.Close()
	if held, err := HoldsDatabase(filepath.Join(dir, "s")); err != nil || !held {
		t.Fatalf("store dir: %v, %v", held, err)
	}
	if err := (&DB{closed: true}).Checkpoint(filepath.Join(dir, "x")); err != ErrClosed {
		t.Fatalf("Checkpoint of a closed store: %v, want ErrClosed", err)
	}
}

// TestAdvanceNextSeqOnlyMovesForward proves the restore reconcile's seq rule (inventory E.5: "Restore reconcile:
// m:next_seq moved past the highest archived seq"): the next commit takes the advanced seq, across a reopen, and
// a lower value changes nothing.
func TestAdvanceNextSeqOnlyMovesForward(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	db := openTest(t, dir, nil)
	if _, err := db.CommitHooks([]*Record{makeRecord(t, "t1", 8, SinkBinding{Index: 0, Type: "http"})}); err != nil {
		t.Fatal(err)
	}
	if err := db.AdvanceNextSeq(500); err != nil {
		t.Fatal(err)
	}
	if err := db.AdvanceNextSeq(10); err != nil || db.NextSeq() != 500 {
		t.Fatalf("AdvanceNextSeq(10) after 500: %v, next %d", err, db.NextSeq())
	}
	_ = db.Close()
	db = openTest(t, dir, nil)
	first, err := db.CommitHooks([]*Record{makeRecord(t, "t1", 8, SinkBinding{Index: 0, Type: "http"})})
	if err != nil || first != 500 {
		t.Fatalf("first seq after advancing to 500 and reopening: %d, %v", first, err)
	}
}
