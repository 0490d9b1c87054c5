package store

import (
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
