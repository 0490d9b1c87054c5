package store

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// pacedStore opens a store whose outcome groups are paced by a long interval, so a wait that does not end
// early shows as a test running for it, and commits and claims n rows of one tenant. One more row is claimed
// and completed first: the first group after a quiet interval never waits, the next ones do.
func pacedStore(t *testing.T, n int) (*DB, []Claimed) {
	t.Helper()
	db := openWith(t, Options{Dir: t.TempDir(), OutcomeInterval: time.Hour})
	commit(t, db, makeRecords(t, n+1, "t1")...)
	cs := claim(t, db, ordOf(t, db, "t1"), time.Now().Add(time.Hour).UnixMilli(), n+1, 0)
	if len(cs) != n+1 {
		t.Fatalf("claimed %d rows, want %d", len(cs), n+1)
	}
	if err := db.Complete(&cs[0]); err != nil {
		t.Fatal(err)
	}
	return db, cs[1:]
}

func outcomeGroups(db *DB) uint64 {
	db.oq.mu.Lock()
	defer db.oq.mu.Unlock()
	return db.oq.groups
}

// settleWithin fails the test when fn has not returned within d: a paced leader that waited out its interval.
func settleWithin(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("outcomes not settled after %v", d)
	}
}

// The outcomes of attempts running side by side go in one group, written as soon as every running attempt has
// queued its outcome (not when the interval ends).
func TestOutcomeGroupGathersRunningAttempts(t *testing.T) {
	const n = 8
	db, cs := pacedStore(t, n)
	before := outcomeGroups(db)
	errs := make([]error, n)
	settleWithin(t, time.Minute, func() {
		for range cs {
			db.BeginAttempt()
		}
		var wg sync.WaitGroup
		for i := range cs {
			wg.Go(func() {
				defer db.EndAttempt()
				errs[i] = db.Complete(&cs[i])
			})
		}
		wg.Wait()
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Complete(%d): %v", i, err)
		}
	}
	if g := outcomeGroups(db) - before; g != 1 {
		t.Fatalf("%d outcome groups, want 1", g)
	}
	if c := db.Counts(); c.Inflight != 0 || c.Pending != 0 {
		t.Fatalf("counts %+v after every row completed", c)
	}
	requireExactCounters(t, db)
}

// One attempt settling its rows one after another (an ordered lane) never waits for others.
func TestOutcomeOfALoneAttemptDoesNotWait(t *testing.T) {
	db, cs := pacedStore(t, 3)
	settleWithin(t, time.Minute, func() {
		for i := range cs {
			db.BeginAttempt()
			err := db.Complete(&cs[i])
			db.EndAttempt()
			if err != nil {
				t.Errorf("Complete(%d): %v", i, err)
			}
		}
	})
	requireExactCounters(t, db)
}

// A Reschedule (the scheduler parking a row) ends a paced leader's wait: it never waits for attempts.
func TestRescheduleEndsAPacedWait(t *testing.T) {
	db, cs := pacedStore(t, 2)
	db.BeginAttempt()
	db.BeginAttempt() // a second attempt that does not answer: the first one's Complete waits for it
	defer db.EndAttempt()
	var err error
	settleWithin(t, time.Minute, func() {
		var wg sync.WaitGroup
		wg.Go(func() {
			defer db.EndAttempt()
			err = db.Complete(&cs[0])
		})
		// The Complete leads and waits for the other attempt (with a deadline, so a leader that did not wait
		// fails the test rather than hanging it).
		for deadline := time.Now().Add(30 * time.Second); outcomeQueued(db) == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if err := db.Reschedule(&cs[1], 0, time.Now().UnixMilli(), "breaker_open"); err != nil {
			t.Errorf("Reschedule: %v", err)
		}
		wg.Wait()
	})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if c := db.Counts(); c.Inflight != 0 || c.Scheduled != 1 {
		t.Fatalf("counts %+v, want 1 scheduled and none in flight", c)
	}
	requireExactCounters(t, db)
}

func outcomeQueued(db *DB) int {
	db.oq.mu.Lock()
	defer db.oq.mu.Unlock()
	return len(db.oq.queue)
}

// A claim marks a row sole only when it saw no other key of its hook in the deliveries CF, so a Complete skips
// the walk over the hook's rows only where there is nothing to find: never for a hook with another row (due or
// dead) or a delivered record, and never for a row the claim reached by a seek.
func TestClaimMarksOnlySoleRows(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	one := SinkBinding{Index: 0, Type: "http"}
	two := []SinkBinding{{Index: 0, Type: "http"}, {Index: 1, Type: "nats"}}
	single := commit(t, db, makeRecords(t, 3, "t1")...)
	multi := commit(t, db, makeRecord(t, "t1", 8, two...))
	last := commit(t, db, makeRecord(t, "t1", 8, one))
	ord := ordOf(t, db, "t1")
	cs := claim(t, db, ord, farFuture(), 10, 0)
	if len(cs) != 6 {
		t.Fatalf("claimed %d rows, want 6", len(cs))
	}
	want := map[uint64]bool{single: false, single + 1: true, single + 2: true, multi: false, last: true}
	for _, c := range cs {
		if c.sole != want[c.Seq] {
			t.Errorf("row %d/%d: sole = %t, want %t", c.Seq, c.Sink, c.sole, want[c.Seq])
		}
	}
	// The multi-sink hook: one row buried, the other put back; claimed again, the due row is not sole (the dead
	// row is beside it), and its Complete keeps the hook for the dead row.
	var due Claimed
	for i := range cs {
		c := &cs[i]
		switch {
		case c.Seq == multi && c.Sink == 0:
			if err := db.Bury(c, 1, "test", 5); err != nil {
				t.Fatal(err)
			}
		case c.Seq == multi:
			if err := db.Reschedule(c, 1, 1, "retry"); err != nil {
				t.Fatal(err)
			}
		default:
			if err := db.Complete(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, seq := range []uint64{single, single + 1, single + 2, last} {
		if _, err := db.GetHook(seq); !errors.Is(err, ErrNotFound) {
			t.Fatalf("hook %d after its only row completed: %v", seq, err)
		}
	}
	if cs = claim(t, db, ord, farFuture(), 10, 0); len(cs) != 1 {
		t.Fatalf("claimed %d rows again, want 1", len(cs))
	}
	due = cs[0]
	if due.Seq != multi || due.sole {
		t.Fatalf("claimed %d/%d sole=%t, want %d/1 not sole", due.Seq, due.Sink, due.sole, multi)
	}
	if err := db.Complete(&due); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetHook(multi); err != nil {
		t.Fatalf("hook with a dead row after its other row completed: %v", err)
	}
	requireExactCounters(t, db)
}

// One group completing hooks with and without an archive obligation, interleaved: each obligation keeps its
// hook (and the delivery's record), each hook without one goes.
func TestGroupKeepsTheArchivedHooksOnly(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var seqs []uint64
	archived := map[uint64]bool{}
	for i := range 6 {
		r := makeRecord(t, "t1", 8, SinkBinding{Index: 0, Type: "http"})
		if i%2 == 1 {
			seq := commitArchived(t, db, r)[0]
			archived[seq] = true
			seqs = append(seqs, seq)
			continue
		}
		seqs = append(seqs, commit(t, db, r))
	}
	cs := claim(t, db, ordOf(t, db, "t1"), farFuture(), 10, 0)
	if len(cs) != len(seqs) {
		t.Fatalf("claimed %d rows, want %d", len(cs), len(seqs))
	}
	outs := make([]func() error, len(cs))
	for i := range cs {
		outs[i] = func() error { return db.Complete(&cs[i]) }
	}
	for i, err := range queueUnderHeldLock(t, db, outs...) {
		if err != nil {
			t.Fatalf("Complete %d: %v", i, err)
		}
	}
	for _, seq := range seqs {
		_, err := db.GetHook(seq)
		if archived[seq] && err != nil {
			t.Errorf("archived hook %d: %v", seq, err)
		}
		if !archived[seq] && !errors.Is(err, ErrNotFound) {
			t.Errorf("hook %d without an obligation kept: %v", seq, err)
		}
	}
	requireExactCounters(t, db)
}
