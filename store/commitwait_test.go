package store

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// OnCommitWait hears the time a group commit spent behind the store's write lock, apart from its own write: a
// commit that finds the lock free reports next to nothing, one that queues behind a held commit reports at least
// the time it was held.
func TestCommitWaitReportsTimeBehindTheLock(t *testing.T) {
	g := newGate()
	waits := make(chan time.Duration, 4)
	db := openWith(t, Options{Dir: t.TempDir(), Faults: &Faults{BeforeCommit: g.beforeCommit},
		OnCommitWait: func(d time.Duration) { waits <- d }})

	if _, err := db.CommitHooks(makeRecords(t, 1, "acme")); err != nil {
		t.Fatal(err)
	}
	if free := recvWait(t, waits); free >= 100*time.Millisecond {
		t.Fatalf("a commit on a free lock waited %v", free)
	}

	g.holdNext()
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { _, err := db.CommitHooks(makeRecords(t, 1, "acme")); first <- err }()
	g.waitEntered(t) // the first holds the lock, in its write
	if free := recvWait(t, waits); free >= 100*time.Millisecond {
		t.Fatalf("the held commit itself waited %v for a free lock", free)
	}
	asked := make(chan struct{})
	go func() {
		close(asked)
		_, err := db.CommitHooks(makeRecords(t, 1, "acme"))
		second <- err
	}()
	<-asked
	const held = 50 * time.Millisecond
	time.Sleep(held) // the second is queued behind the lock by now
	select {
	case d := <-waits:
		t.Fatalf("the second commit reported a wait of %v while the lock was still held", d)
	default:
	}
	g.open()
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if d := recvWait(t, waits); d < held*8/10 {
		t.Fatalf("the second commit reported waiting %v for a lock held %v after it asked", d, held)
	}
}

func recvWait(t *testing.T, waits <-chan time.Duration) time.Duration {
	t.Helper()
	select {
	case d := <-waits:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the commit reported no wait")
		return 0
	}
}

// OnSyncWrite hears how long each group commit's synced write ran in RocksDB, apart from the rest of the commit:
// a commit held 500 ms before its write reports a write shorter than that; a commit that writes nothing (every
// record a duplicate) or whose write fails reports nothing.
func TestSyncWriteReportsTheWriteAlone(t *testing.T) {
	const held = 500 * time.Millisecond
	var hold, fail bool
	writes := make(chan time.Duration, 8)
	db := openWith(t, Options{Dir: t.TempDir(), OnSyncWrite: func(d time.Duration) { writes <- d },
		Faults: &Faults{BeforeCommit: func() error {
			if hold {
				time.Sleep(held)
			}
			if fail {
				return errors.New("refused by the test")
			}
			return nil
		}}})
	recs := makeRecords(t, 2, "acme")
	for i, r := range recs {
		r.DedupeKey, r.DedupeTTL = fmt.Sprintf("evt-%d", i), time.Hour
	}

	hold = true
	start := time.Now()
	if _, err := db.CommitHooks(recs); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	hold = false
	d := recvWait(t, writes)
	if d <= 0 || d >= held || took < held {
		t.Fatalf("a commit of %v held %v before its write reported a write of %v; want more than 0, less than %v",
			took, held, d, held)
	}

	// The same keys again: every record a duplicate, nothing written.
	if _, err := db.CommitHooks(recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Outcome.Status != OutcomeDuplicate {
			t.Fatalf("record %s: %v, want a duplicate", r.DedupeKey, r.Outcome.Status)
		}
	}
	fail = true
	if _, err := db.CommitHooks(makeRecords(t, 1, "acme")); err == nil {
		t.Fatal("a commit whose write the fault refused succeeded")
	}
	select {
	case d := <-writes:
		t.Fatalf("a commit that wrote nothing reported a write of %v", d)
	default:
	}
}
