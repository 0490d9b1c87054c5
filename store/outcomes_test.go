package store

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/test/poll"
)

// queueUnderHeldLock starts every outcome of outs while the test holds cmu, waits until all of them are
// queued, and releases cmu: the first becomes the leader and finds the others queued, so they settle as one
// group. It returns their answers in the order of outs.
func queueUnderHeldLock(t *testing.T, db *DB, outs ...func() error) []error {
	t.Helper()
	errs := make([]error, len(outs))
	var wg sync.WaitGroup
	db.cmu.Lock()
	for i, out := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = out()
		}()
	}
	poll.True(t, 5*time.Second, "every outcome queued", func() bool {
		db.oq.mu.Lock()
		defer db.oq.mu.Unlock()
		return len(db.oq.queue) == len(outs)
	})
	db.cmu.Unlock()
	wg.Wait()
	return errs
}

// Invariant 8: "a hook is deleted with its last delivery row". Both rows of one hook completed in one group:
// the second sees the first's deletion, so the hook goes exactly once and is not left behind.
func TestGroupCompletingEveryRowOfAHookDeletesItOnce(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	first := commit(t, db, makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http"}, SinkBinding{Index: 1, Type: "nats"}))
	got := claim(t, db, ordOf(t, db, "acme"), farFuture(), 10, 0)
	if len(got) != 2 {
		t.Fatalf("claimed %d rows, want 2", len(got))
	}
	errs := queueUnderHeldLock(t, db, func() error { return db.Complete(&got[0]) }, func() error { return db.Complete(&got[1]) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Complete %d: %v", i, err)
		}
	}
	// One batch: two inflight keys, two rows, the hook once, the tenant's counters once; no claim marker
	// deletion, as the hook never had one.
	db.cmu.Lock()
	n := db.owb.Count()
	db.cmu.Unlock()
	if n != 6 {
		t.Fatalf("the group's batch holds %d operations, want 6 (the hook deleted once, counters written once)", n)
	}
	if _, err := db.GetHook(first); !errors.Is(err, ErrNotFound) {
		t.Fatalf("hook after both rows completed in one group: %v", err)
	}
	if c := db.Counts(); c != (Counts{}) {
		t.Fatalf("counts: %+v", c)
	}
	requireExactCounters(t, db)

	// The same with a claim marker: it is deleted once, with the hook.
	first = commit(t, db, makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http"}, SinkBinding{Index: 1, Type: "nats"}))
	if err := db.PutClaimRef(first, "urn:ankusa:claim:v1:acme:01J0000000000000000000000"); err != nil {
		t.Fatal(err)
	}
	got = claim(t, db, ordOf(t, db, "acme"), farFuture(), 10, 0)
	errs = queueUnderHeldLock(t, db, func() error { return db.Complete(&got[0]) }, func() error { return db.Complete(&got[1]) })
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("Complete, Complete: %v", errs)
	}
	db.cmu.Lock()
	n = db.owb.Count()
	db.cmu.Unlock()
	if n != 7 {
		t.Fatalf("the group's batch holds %d operations, want 7 (the hook and its marker deleted once, counters written once)", n)
	}
	if _, ok, err := db.ClaimRef(first); err != nil || ok {
		t.Fatalf("claim marker after its hook was deleted: %v, %v", ok, err)
	}
	requireExactCounters(t, db)

	// One row completed and the other buried in one group: the dead row keeps the hook.
	first = commit(t, db, makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http"}, SinkBinding{Index: 1, Type: "nats"}))
	got = claim(t, db, ordOf(t, db, "acme"), farFuture(), 10, 0)
	errs = queueUnderHeldLock(t, db, func() error { return db.Complete(&got[0]) }, func() error { return db.Bury(&got[1], 1, "gone", 5) })
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("Complete, Bury: %v", errs)
	}
	if _, err := db.GetHook(first); err != nil {
		t.Fatalf("hook with a dead row was deleted: %v", err)
	}
	requireExactCounters(t, db)
}

// "An outcome for a row no longer claimed changes nothing": two outcomes of one row in one group settle it
// once (the second sees the first's effect), and a refused outcome does not fail the others of its group.
func TestSameRowSettledTwiceInOneGroupSucceedsOnce(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	commit(t, db, makeRecord(t, "acme", 8, SinkBinding{Type: "http"}), makeRecord(t, "acme", 8, SinkBinding{Type: "http"}),
		makeRecord(t, "acme", 8, SinkBinding{Type: "http"}))
	got := claim(t, db, ordOf(t, db, "acme"), farFuture(), 10, 0)
	a, b := got[0], got[0] // two dispatch copies of one claim
	errs := queueUnderHeldLock(t, db,
		func() error { return db.Reschedule(&a, 1, farFuture(), "retry") },
		func() error { return db.Complete(&b) },
		func() error { return db.Bury(&got[1], 1, "dead", 5) })
	ok := 0
	for _, err := range errs[:2] {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrNotClaimed):
			t.Fatalf("outcome of a row settled in the same group: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d outcomes of one row succeeded in one group (%v), want 1", ok, errs)
	}
	if errs[2] != nil {
		t.Fatalf("Bury beside a refused outcome: %v", errs[2])
	}
	wantScheduled := int64(0)
	if errs[0] == nil { // the queue's order decides which of the two came first
		wantScheduled = 1
	}
	if c := db.Counts(); c.Inflight != 1 || c.Dead != 1 || c.Scheduled != wantScheduled {
		t.Fatalf("counts %+v after %v", c, errs)
	}
	requireExactCounters(t, db)

	// Racing without a held lock: whichever groups form, exactly one of eight settles the row.
	c := got[2]
	var wg sync.WaitGroup
	results := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := c
			if i%2 == 0 {
				results <- db.Complete(&cc)
			} else {
				results <- db.Bury(&cc, 1, "dead", 5)
			}
		}()
	}
	wg.Wait()
	close(results)
	ok = 0
	for err := range results {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrNotClaimed):
			t.Fatal(err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 8 racing outcomes of one row succeeded, want 1", ok)
	}
	requireExactCounters(t, db)
}

// Invariant 7: "the per-tenant counters always equal what the index holds, on disk and in memory". Many
// goroutines complete, reschedule and bury at once (some rows twice) while CommitHooks runs, so outcome groups
// of several tenants and sizes interleave with synced commits; every row is settled exactly once, and the
// counters equal a recount before and after a reopen.
func TestConcurrentOutcomeGroupsKeepCountersExact(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	tenants := []string{"a", "b", "c"}
	commit(t, db, makeRecord(t, "a", 1, SinkBinding{Type: "http"}), makeRecord(t, "b", 1, SinkBinding{Type: "http"}),
		makeRecord(t, "c", 1, SinkBinding{Type: "http"}))
	errs := make(chan error, 64)
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		defer close(stop)
		for i := range 60 {
			recs := make([]*Record, 8)
			for j := range recs {
				recs[j] = makeRecord(t, tenants[(i+j)%3], 1+j, SinkBinding{Index: 0, Type: "http"}, SinkBinding{Index: 1, Type: "nats"})
			}
			if _, err := db.CommitHooks(recs); err != nil {
				errs <- err
				return
			}
		}
	}()

	work := make(chan Claimed, 64)
	var claimers, workers sync.WaitGroup
	for _, tenant := range tenants {
		ord := ordOf(t, db, tenant) // on the test goroutine: ordOf may fail the test
		claimers.Add(1)
		go func() {
			defer claimers.Done()
			var cs []Claimed
			for {
				var err error
				if cs, err = db.ClaimDue(ord, farFuture(), 16, 0, cs[:0]); err != nil {
					errs <- err
					return
				}
				for _, c := range cs {
					work <- c
					if (c.Seq+uint64(c.Sink))%3 == 0 {
						work <- c // settled twice: one of the two must be refused
					}
				}
				select {
				case <-stop:
					if len(cs) == 0 {
						return
					}
				default:
				}
			}
		}()
	}
	var mu sync.Mutex
	wins := make(map[DeliveryKey]int)
	for range 12 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for c := range work {
				var err error
				switch (c.Seq + uint64(c.Sink)) % 4 {
				case 0:
					// Due after the test ends, so a claim never takes the row again while a duplicate is queued.
					err = db.Reschedule(&c, c.Row.Attempts+1, farFuture()+time.Hour.Milliseconds(), "retry")
				case 1:
					err = db.Bury(&c, c.Row.Attempts+1, "dead", time.Now().UnixMilli())
				default:
					err = db.Complete(&c)
				}
				switch {
				case err == nil:
					mu.Lock()
					wins[DeliveryKey{Seq: c.Seq, Sink: c.Sink}]++
					mu.Unlock()
				case !errors.Is(err, ErrNotClaimed):
					errs <- err
				}
			}
		}()
	}
	writer.Wait()
	claimers.Wait()
	close(work)
	workers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(wins) < 60*8*2 {
		t.Fatalf("settled %d rows, want every one of the %d committed", len(wins), 60*8*2)
	}
	for k, n := range wins {
		if n != 1 {
			t.Fatalf("row %+v settled %d times", k, n)
		}
	}
	requireExactCounters(t, db)
	requireHooksMatchRows(t, db)
	before := db.Counts()
	if before.Dead == 0 || before.Scheduled == 0 || before.Inflight != 0 {
		t.Fatalf("counts %+v: want dead and scheduled rows and none inflight", before)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	if got := db.Counts(); got != before {
		t.Fatalf("counts after reopen %+v, before %+v", got, before)
	}
	requireExactCounters(t, db)
}

// requireHooksMatchRows fails unless every delivery row has its hook and every hook has a delivery row (the
// caller's store holds no archive obligation): no hook deleted too early, none left behind.
func requireHooksMatchRows(t *testing.T, db *DB) {
	t.Helper()
	rows := make(map[uint64]bool)
	if err := db.ForEachDelivery(func(seq uint64, _ DeliveryRow) error { rows[seq] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	hooks := make(map[uint64]bool)
	err := db.read(func() error {
		return db.scan(cfHooks, nil, func(k, _ []byte) error {
			seq, err := ParseHookKey(k)
			hooks[seq] = true
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for seq := range rows {
		if !hooks[seq] {
			t.Fatalf("hook %d deleted while a delivery row of it remains", seq)
		}
	}
	for seq := range hooks {
		if !rows[seq] {
			t.Fatalf("hook %d left behind with no delivery row", seq)
		}
	}
}

// Each Reschedule and Bury with an attempt appends it to the row's history in the same write (no other key),
// a park (no attempt) appends nothing, and only the last MaxHistory attempts are kept while Attempts counts all.
func TestOutcomesAppendAttemptHistory(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	rec := makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http"})
	commit(t, db, rec)
	ord := ordOf(t, db, "acme")
	const total = MaxHistory + 3
	for i := uint32(1); i <= total; i++ {
		got := claim(t, db, ord, farFuture()+int64(i)*time.Hour.Milliseconds(), 10, 0)
		if len(got) != 1 {
			t.Fatalf("attempt %d: claimed %d rows", i, len(got))
		}
		c := got[0]
		c.Last = Attempt{Number: i, StartedAt: int64(i), LatencyUS: 10 * i, Class: AttemptTransient, Status: 503,
			Error: "refused " + strconv.Itoa(int(i))}
		if i == total {
			if err := db.Bury(&c, i, "gave up", 99); err != nil {
				t.Fatal(err)
			}
			break
		}
		if err := db.Reschedule(&c, i, farFuture()+int64(i)*time.Hour.Milliseconds(), "refused"); err != nil {
			t.Fatal(err)
		}
		if i == 1 { // a park: no attempt made
			got := claim(t, db, ord, farFuture()+time.Hour.Milliseconds(), 10, 0)
			if err := db.Reschedule(&got[0], i, got[0].DueAt, "parked"); err != nil {
				t.Fatal(err)
			}
		}
	}
	f, err := db.FindHook(rec.ID)
	if err != nil || len(f.Rows) != 1 {
		t.Fatalf("FindHook: %+v, %v", f, err)
	}
	r := f.Rows[0]
	if r.Attempts != total || r.State != StateDead || len(r.History) != MaxHistory {
		t.Fatalf("row: attempts %d, state %d, history %d", r.Attempts, r.State, len(r.History))
	}
	for i, a := range r.History {
		n := uint32(total - MaxHistory + 1 + i)
		want := Attempt{Number: n, StartedAt: int64(n), LatencyUS: 10 * n, Class: AttemptTransient, Status: 503,
			Error: "refused " + strconv.Itoa(int(n))}
		if a != want {
			t.Fatalf("history[%d] = %+v, want %+v", i, a, want)
		}
	}
}
