package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"
)

// recount derives every counter from the index CF and the delivery rows, the slow way: what the counters kept
// incrementally must always equal.
func recount(t testing.TB, db *DB) (map[uint32]Counts, Counts) {
	t.Helper()
	per := make(map[uint32]Counts)
	var total Counts
	err := db.read(func() error {
		return db.scan(cfIndex, nil, func(k, v []byte) error {
			var ord uint32
			var c Counts
			switch k[0] {
			case IndexDue:
				dk, err := ParseDueKey(k)
				if err != nil {
					return err
				}
				size, _ := ParseIndexValue(v)
				row, _, err := db.readRow(DeliveryKey{Seq: dk.Seq, Sink: dk.Sink})
				if err != nil {
					return err
				}
				if row.State == StateScheduled {
					c.Scheduled = 1
				} else {
					c.Pending = 1
				}
				ord, c.PendingBytes = dk.Ord, int64(size)
			case IndexInflight:
				fk, err := ParseInflightKey(k)
				if err != nil {
					return err
				}
				ord, c.Inflight = fk.Ord, 1
			case IndexDead:
				xk, err := ParseDeadKey(k)
				if err != nil {
					return err
				}
				ord, c.Dead = xk.Ord, 1
			case IndexArchive:
				total.ArchivePending++
				return nil
			case IndexClaim:
				return nil
			}
			p := per[ord]
			p.Pending += c.Pending
			p.Scheduled += c.Scheduled
			p.Inflight += c.Inflight
			p.Dead += c.Dead
			p.PendingBytes += c.PendingBytes
			per[ord] = p
			total.Pending += c.Pending
			total.Scheduled += c.Scheduled
			total.Inflight += c.Inflight
			total.Dead += c.Dead
			total.PendingBytes += c.PendingBytes
			return nil
		})
	})
	if err != nil {
		t.Fatalf("recount: %v", err)
	}
	return per, total
}

// requireExactCounters fails unless the kept counters (totals, every tenant's, the active list) equal a recount.
func requireExactCounters(t testing.TB, db *DB) {
	t.Helper()
	per, total := recount(t, db)
	if got := db.Counts(); got != total {
		t.Fatalf("Counts() = %+v, recount %+v", got, total)
	}
	var wantActive []uint32
	for ord, c := range per {
		if got := db.TenantCounts(ord); got != c {
			t.Fatalf("TenantCounts(%d) = %+v, recount %+v", ord, got, c)
		}
		if c.Pending+c.Scheduled > 0 {
			wantActive = append(wantActive, ord)
		}
	}
	active := db.ActiveTenants(nil)
	slices.Sort(active)
	slices.Sort(wantActive)
	if !slices.Equal(active, wantActive) {
		t.Fatalf("ActiveTenants = %v, want %v", active, wantActive)
	}
}

func commit(t testing.TB, db *DB, recs ...*Record) uint64 {
	t.Helper()
	first, err := db.CommitHooks(recs)
	if err != nil {
		t.Fatalf("CommitHooks: %v", err)
	}
	return first
}

func claim(t testing.TB, db *DB, ord uint32, now int64, max int, maxBytes int64) []Claimed {
	t.Helper()
	c, err := db.ClaimDue(ord, now, max, maxBytes, nil)
	if err != nil {
		t.Fatalf("ClaimDue: %v", err)
	}
	return c
}

func ordOf(t testing.TB, db *DB, tenant string) uint32 {
	t.Helper()
	o, ok := db.TenantOrdinal(tenant)
	if !ok {
		t.Fatalf("tenant %q has no ordinal", tenant)
	}
	return o
}

func seqs(cs []Claimed) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.Seq
	}
	return out
}

func farFuture() int64 { return time.Now().Add(time.Hour).UnixMilli() }

// Seed: "dispatch is a scheduler over the due rows"; spec: ClaimDue moves up to max rows due at or before now,
// within maxBytes (always one), from due to inflight, in due-key order, and the counters follow.
func TestClaimDueClaimsInDueOrderWithinNowMaxAndBytes(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	http := SinkBinding{Index: 0, Type: "http"}
	first := commit(t, db, makeRecord(t, "acme", 10, http), makeRecord(t, "acme", 20, http))
	commit(t, db, makeRecord(t, "acme", 30, http), makeRecord(t, "acme", 40, http), makeRecord(t, "acme", 50, http))
	ord := ordOf(t, db, "acme")
	if got := db.ActiveTenants(nil); !slices.Equal(got, []uint32{ord}) {
		t.Fatalf("ActiveTenants after a commit = %v, want [%d]", got, ord)
	}
	if c := db.Counts(); c.Pending != 5 || c.PendingBytes != 150 || c.Inflight != 0 {
		t.Fatalf("counts after commit: %+v", c)
	}
	requireExactCounters(t, db)

	next, ok, err := db.NextDue(ord)
	if err != nil || !ok {
		t.Fatalf("NextDue: %d, %v, %v", next, ok, err)
	}
	if got := claim(t, db, ord, next-1, 10, 0); len(got) != 0 {
		t.Fatalf("claimed %d rows before they were due", len(got))
	}
	got := claim(t, db, ord, farFuture(), 2, 0)
	if !slices.Equal(seqs(got), []uint64{first, first + 1}) {
		t.Fatalf("first claim of 2: seqs %v, want [%d %d]", seqs(got), first, first+1)
	}
	if got[0].Row.Source != "src" || got[0].Row.SinkType != "http" || got[0].Size != 10 || got[0].Ord != ord ||
		got[0].DueAt != next || got[0].Row.ReceivedAt == 0 {
		t.Fatalf("claimed row %+v", got[0])
	}
	if c := db.TenantCounts(ord); c.Pending != 3 || c.Inflight != 2 || c.PendingBytes != 120 {
		t.Fatalf("counts after claiming 2: %+v", c)
	}
	// 30 fits in 35 bytes; 30+40 does not.
	if got := claim(t, db, ord, farFuture(), 10, 35); !slices.Equal(seqs(got), []uint64{first + 2}) {
		t.Fatalf("claim within 35 bytes: seqs %v", seqs(got))
	}
	// A row larger than maxBytes is still claimed alone: a window never starves.
	if got := claim(t, db, ord, farFuture(), 10, 1); !slices.Equal(seqs(got), []uint64{first + 3}) {
		t.Fatalf("claim within 1 byte: seqs %v", seqs(got))
	}
	if got := claim(t, db, ord, farFuture(), 10, 0); !slices.Equal(seqs(got), []uint64{first + 4}) {
		t.Fatalf("last claim: seqs %v", seqs(got))
	}
	if got := claim(t, db, ord, farFuture(), 10, 0); len(got) != 0 {
		t.Fatalf("claimed %d rows from an empty tenant", len(got))
	}
	if n, err := db.CountIndex(IndexInflight); err != nil || n != 5 {
		t.Fatalf("inflight keys: %d, %v", n, err)
	}
	if len(db.ActiveTenants(nil)) != 0 {
		t.Fatal("a tenant with every row claimed is still active")
	}
	if _, ok, err := db.NextDue(ord); ok || err != nil {
		t.Fatalf("NextDue of a drained tenant: %v, %v", ok, err)
	}
	requireExactCounters(t, db)
}

// Spec: first due time is the commit time, never going backwards across calls, so first attempts sort by seq
// in the due index whatever their ReceivedAt (ordered lanes rely on it).
func TestFirstAttemptsAreClaimedInSeqOrder(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var recs []*Record
	for i := range 20 {
		r := makeRecord(t, "acme", 1, SinkBinding{Type: "http"})
		r.ReceivedAt = int64(1_000_000 - i) // later hooks claim to be older
		recs = append(recs, r)
	}
	first := commit(t, db, recs[:10]...)
	commit(t, db, recs[10:]...)
	got := claim(t, db, ordOf(t, db, "acme"), farFuture(), 100, 0)
	for i, c := range got {
		if c.Seq != first+uint64(i) {
			t.Fatalf("claim %d has seq %d, want %d (seq order)", i, c.Seq, first+uint64(i))
		}
	}
}

// Seed: "a hook is deleted once its last delivery row (and archive obligation) is cleared"; a hook with two
// sinks survives the first Complete.
func TestCompleteDeletesTheRowAndTheHookWithItsLastRow(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	two := makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http"}, SinkBinding{Index: 1, Type: "nats"})
	archived := makeRecord(t, "acme", 8, SinkBinding{Index: 0, Type: "http"})
	archived.Archive = true
	first := commit(t, db, two, archived)
	got := claim(t, db, ordOf(t, db, "acme"), farFuture(), 10, 0)
	if len(got) != 3 {
		t.Fatalf("claimed %d rows, want 3", len(got))
	}
	if err := db.Complete(&got[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetHook(first); err != nil {
		t.Fatalf("hook with a second sink pending was deleted: %v", err)
	}
	if err := db.Complete(&got[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetHook(first); !errors.Is(err, ErrNotFound) {
		t.Fatalf("hook after its last row completed: %v", err)
	}
	if err := db.Complete(&got[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetHook(first + 1); err != nil {
		t.Fatalf("hook with an archive obligation was deleted: %v", err)
	}
	n := 0
	if err := db.ForEachDelivery(func(uint64, DeliveryRow) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("%d delivery rows left, %v", n, err)
	}
	if c := db.Counts(); c != (Counts{ArchivePending: 1}) {
		t.Fatalf("counts after every row completed: %+v", c)
	}
	requireExactCounters(t, db)
}

// An outcome for a row no longer claimed changes nothing: counters cannot be settled twice.
func TestOutcomeOfAnUnclaimedRowIsRefused(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	commit(t, db, makeRecord(t, "acme", 8, SinkBinding{Type: "http"}), makeRecord(t, "acme", 8, SinkBinding{Type: "http"}))
	got := claim(t, db, ordOf(t, db, "acme"), farFuture(), 10, 0)
	if err := db.Complete(&got[0]); err != nil {
		t.Fatal(err)
	}
	if err := db.Complete(&got[0]); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("second Complete: %v", err)
	}
	if err := db.Reschedule(&got[0], 1, 5, "x"); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("Reschedule after Complete: %v", err)
	}
	if n, err := db.RecoverInflight(); err != nil || n != 1 {
		t.Fatalf("RecoverInflight: %d, %v", n, err)
	}
	if err := db.Bury(&got[1], 1, "late", 5); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("Bury of a recovered row: %v", err)
	}
	requireExactCounters(t, db)
}

// Seed: "a retry is a row due later, holding no slot"; spec: Reschedule counts as scheduled and wakes Notify.
func TestRescheduleMakesTheRowScheduledAndDueLater(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	commit(t, db, makeRecord(t, "acme", 8, SinkBinding{Type: "http"}))
	ord := ordOf(t, db, "acme")
	got := claim(t, db, ord, farFuture(), 1, 0)
	select {
	case <-db.Notify(): // the commit's signal
	default:
		t.Fatal("a commit did not signal Notify")
	}
	later := farFuture() + 60_000
	if err := db.Reschedule(&got[0], 1, later, "{sink, http, 503}"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-db.Notify():
	default:
		t.Fatal("Reschedule did not signal Notify")
	}
	if c := db.TenantCounts(ord); c.Scheduled != 1 || c.Pending != 0 || c.Inflight != 0 || c.PendingBytes != 8 {
		t.Fatalf("counts after Reschedule: %+v", c)
	}
	if at, ok, err := db.NextDue(ord); err != nil || !ok || at != later {
		t.Fatalf("NextDue = %d, %v, %v; want %d", at, ok, err, later)
	}
	if at, ok, err := db.OldestDue(); err != nil || !ok || at != later {
		t.Fatalf("OldestDue = %d, %v, %v; want %d", at, ok, err, later)
	}
	if got := claim(t, db, ord, later-1, 10, 0); len(got) != 0 {
		t.Fatal("a retry was claimed before its due time")
	}
	again := claim(t, db, ord, later, 10, 0)
	if len(again) != 1 || again[0].Row.Attempts != 1 || again[0].Row.LastError != "{sink, http, 503}" ||
		again[0].Row.State != StateScheduled || again[0].DueAt != later {
		t.Fatalf("reclaimed retry %+v", again)
	}
	requireExactCounters(t, db)
}

// Seed: "dead rows keep the hook"; inventory F.4: the DLQ is the dead rows, listed newest first with reason.
func TestBuryKeepsTheHookAndListDeadShowsIt(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	a := makeRecord(t, "acme", 8, SinkBinding{Type: "http"})
	b := makeRecord(t, "globex", 9, SinkBinding{Type: "nats"})
	b.Source = "other"
	c := makeRecord(t, "acme", 10, SinkBinding{Type: "http"})
	first := commit(t, db, a, b, c)
	var all []Claimed
	for _, tenant := range []string{"acme", "globex"} {
		all = append(all, claim(t, db, ordOf(t, db, tenant), farFuture(), 10, 0)...)
	}
	deadAt := map[uint64]int64{first: 1000, first + 1: 3000, first + 2: 2000}
	for i := range all {
		if err := db.Bury(&all[i], 5, fmt.Sprintf("reason %d", all[i].Seq), deadAt[all[i].Seq]); err != nil {
			t.Fatal(err)
		}
	}
	for seq := first; seq < first+3; seq++ {
		if _, err := db.GetHook(seq); err != nil {
			t.Fatalf("dead row's hook %d: %v", seq, err)
		}
	}
	if c := db.Counts(); c.Dead != 3 || c.Inflight != 0 || c.Pending != 0 {
		t.Fatalf("counts after burying: %+v", c)
	}
	dead, err := db.ListDead("", 10)
	if err != nil {
		t.Fatal(err)
	}
	var order []uint64
	for _, d := range dead {
		order = append(order, d.Seq)
	}
	if want := []uint64{first + 1, first + 2, first}; !slices.Equal(order, want) {
		t.Fatalf("ListDead order %v, want newest first %v", order, want)
	}
	d := dead[0]
	if d.Tenant != "globex" || d.Source != "other" || d.SinkType != "nats" || d.Reason != fmt.Sprintf("reason %d", first+1) ||
		d.DeadAt != 3000 || d.ReceivedAt != b.ReceivedAt || d.Size != 9 || d.ID != b.ID {
		t.Fatalf("dead entry %+v", d)
	}
	if only, err := db.ListDead("other", 10); err != nil || len(only) != 1 || only[0].Seq != first+1 {
		t.Fatalf("ListDead(other) = %+v, %v", only, err)
	}
	if two, err := db.ListDead("", 2); err != nil || len(two) != 2 {
		t.Fatalf("ListDead limit 2 = %d entries, %v", len(two), err)
	}
	// Paging: each page starts after the previous page's last entry, across tenants, until nothing is left.
	var paged []uint64
	var before *DeadKey
	for range 4 {
		page, err := db.ListDeadPage(DeadFilter{Before: before}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page[0].Seq)
		c := page[0].Cursor()
		before = &c
	}
	if !slices.Equal(paged, order) {
		t.Fatalf("pages of one: %v, want %v", paged, order)
	}
	if acme, err := db.ListDeadPage(DeadFilter{Tenants: []string{"acme"}}, 10); err != nil || len(acme) != 2 || acme[0].Tenant != "acme" || acme[1].Tenant != "acme" {
		t.Fatalf("ListDeadPage(tenant acme) = %+v, %v", acme, err)
	}
	if recent, err := db.ListDeadPage(DeadFilter{Since: 2000}, 10); err != nil || len(recent) != 2 || recent[1].Seq != first+2 {
		t.Fatalf("ListDeadPage(since 2000) = %+v, %v", recent, err)
	}
	requireExactCounters(t, db)
}

// Seed: "A claimed row is put back as due at the next start"; spec: counters survive Close/Open exactly.
func TestClaimedRowsAreDueAgainAfterReopenAndCountersSurvive(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	var recs []*Record
	for i := range 6 {
		recs = append(recs, makeRecord(t, fmt.Sprintf("t%d", i%2), 10+i, SinkBinding{Type: "http"}))
	}
	recs[0].Archive = true
	first := commit(t, db, recs...)
	t0 := claim(t, db, ordOf(t, db, "t0"), farFuture(), 10, 0)
	t1 := claim(t, db, ordOf(t, db, "t1"), farFuture(), 2, 0)
	if err := db.Reschedule(&t0[0], 2, 5, "retry"); err != nil { // a retry due long ago
		t.Fatal(err)
	}
	if err := db.Bury(&t0[1], 3, "dead", 7); err != nil {
		t.Fatal(err)
	}
	if err := db.Complete(&t1[0]); err != nil {
		t.Fatal(err)
	}
	// Still claimed: t0[2] (a first attempt) and t1[1]; then one claimed retry.
	retry := claim(t, db, ordOf(t, db, "t0"), farFuture(), 10, 0)
	if len(retry) != 1 || retry[0].Row.State != StateScheduled {
		t.Fatalf("reclaimed %+v", retry)
	}
	before, per := db.Counts(), map[string]Counts{"t0": db.TenantCounts(ordOf(t, db, "t0")), "t1": db.TenantCounts(ordOf(t, db, "t1"))}
	if before.Inflight != 3 {
		t.Fatalf("inflight before reopen %+v", before)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, dir, nil)
	if got := db.Counts(); got != before {
		t.Fatalf("Counts after reopen %+v, before %+v", got, before)
	}
	for name, c := range per {
		if got := db.TenantCounts(ordOf(t, db, name)); got != c {
			t.Fatalf("%s counts after reopen %+v, before %+v", name, got, c)
		}
	}
	if name, ok := db.TenantName(ordOf(t, db, "t1")); !ok || name != "t1" {
		t.Fatalf("TenantName after reopen: %q, %v", name, ok)
	}
	requireExactCounters(t, db)
	n, err := db.RecoverInflight()
	if err != nil || n != 3 {
		t.Fatalf("RecoverInflight = %d, %v; want 3", n, err)
	}
	select {
	case <-db.Notify():
	default:
		t.Fatal("RecoverInflight did not signal Notify")
	}
	// Pending: the two recovered first attempts and t1's never-claimed row; scheduled: the recovered retry.
	if c := db.Counts(); c.Inflight != 0 || c.Pending != 3 || c.Scheduled != 1 || c.Dead != 1 || c.ArchivePending != 1 {
		t.Fatalf("counts after RecoverInflight: %+v", c)
	}
	requireExactCounters(t, db)
	again := claim(t, db, ordOf(t, db, "t0"), farFuture(), 10, 0)
	again = append(again, claim(t, db, ordOf(t, db, "t1"), farFuture(), 10, 0)...)
	want := []uint64{retry[0].Seq, t0[2].Seq, t1[1].Seq, first + 5}
	if got := seqs(again); !slices.Equal(got, want) {
		t.Fatalf("recovered rows claimed as %v, want %v (each at the due time it was claimed at)", got, want)
	}
	if n, err := db.RecoverInflight(); err != nil || n != 4 {
		t.Fatalf("second RecoverInflight = %d, %v", n, err)
	}
	requireExactCounters(t, db)
}

// Concurrency: commits (the writer task) and outcomes (lanes, the scheduler, a replay) race; the counters stay
// exact in memory and on disk.
func TestConcurrentCommitsAndOutcomesKeepCountersExact(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	tenants := []string{"a", "b", "c"}
	commit(t, db, makeRecord(t, "a", 1, SinkBinding{Type: "http"}), makeRecord(t, "b", 1, SinkBinding{Type: "http"}),
		makeRecord(t, "c", 1, SinkBinding{Type: "http"}))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the writer
		defer wg.Done()
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
	for w, tenant := range tenants { // one dispatcher per tenant, settling each row a different way
		ord := ordOf(t, db, tenant) // on the test goroutine: ordOf may fail the test
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cs []Claimed
			for i := 0; ; i++ {
				var err error
				cs, err = db.ClaimDue(ord, farFuture(), 7, 0, cs[:0])
				if err != nil {
					errs <- err
					return
				}
				for k := range cs {
					c := &cs[k]
					switch (i + k + w) % 4 {
					case 0:
						err = db.Reschedule(c, c.Row.Attempts+1, time.Now().UnixMilli(), "retry")
					case 1:
						err = db.Bury(c, c.Row.Attempts+1, "dead", time.Now().UnixMilli())
					default:
						err = db.Complete(c)
					}
					if err != nil {
						errs <- err
						return
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
	wg.Add(1)
	go func() { // the gauges and the scheduler's reads, which never take the writers' lock
		defer wg.Done()
		var active []uint32
		for {
			_ = db.Counts()
			active = db.ActiveTenants(active[:0])
			for _, ord := range active {
				_ = db.TenantCounts(ord)
				if _, ok := db.TenantName(ord); !ok {
					errs <- fmt.Errorf("active tenant %d has no name", ord)
					return
				}
				if _, _, err := db.NextDue(ord); err != nil {
					errs <- err
					return
				}
			}
			if _, _, err := db.OldestDue(); err != nil {
				errs <- err
				return
			}
			if _, err := db.ListDead("", 5); err != nil {
				errs <- err
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	wg.Add(1)
	go func() { // the replayer
		defer wg.Done()
		for {
			j := ReplayJob{ID: newID(), Kind: "dlq", State: "running", CreatedAt: time.Now().UnixMilli()}
			if err := db.PutReplayJob(&j); err != nil {
				errs <- err
				return
			}
			if _, err := db.ReplayDeadStep(&j, 5, time.Now().UnixMilli()); err != nil {
				errs <- err
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	requireExactCounters(t, db)
	before := db.Counts()
	if before.Dead == 0 {
		t.Fatal("the test buried nothing; it proves less than it claims")
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

// Damage never stalls a tenant: a due key without its row is dropped, an undecodable row is dead-lettered
// ("undecodable delivery row"), and the rows behind them are claimed.
func TestDamagedRowsDoNotStallTheTenant(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	first := commit(t, db, makeRecord(t, "acme", 1, SinkBinding{Type: "http"}), makeRecord(t, "acme", 1, SinkBinding{Type: "http"}),
		makeRecord(t, "acme", 1, SinkBinding{Type: "http"}))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rawEdit(t, dir, func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
		if err := rdb.DeleteCF(wo, cfs[cfDeliveries], DeliveryKey{Seq: first}.Append(nil)); err != nil {
			return err
		}
		return rdb.PutCF(wo, cfs[cfDeliveries], DeliveryKey{Seq: first + 1}.Append(nil), []byte{9, 9})
	})
	db = openTest(t, dir, nil)
	got := claim(t, db, ordOf(t, db, "acme"), farFuture(), 10, 0)
	if !slices.Equal(seqs(got), []uint64{first + 2}) {
		t.Fatalf("claimed %v, want only the healthy row %d", seqs(got), first+2)
	}
	dead, err := db.ListDead("", 10)
	if err != nil || len(dead) != 1 || dead[0].Seq != first+1 || dead[0].Reason != undecodableReason {
		t.Fatalf("ListDead = %+v, %v", dead, err)
	}
	if c := db.Counts(); c.Pending != 0 || c.Inflight != 1 || c.Dead != 1 {
		t.Fatalf("counts %+v", c)
	}
	requireExactCounters(t, db)
}

// The key layout changed from format 1 (no counters): a format 1 store is migrated on open, its counters
// rebuilt from the due and archive keys, and its rows claimed as before.
func TestFormat1StoreIsMigratedOnOpen(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	r := makeRecord(t, "acme", 5, SinkBinding{Type: "http"}, SinkBinding{Index: 1, Type: "nats"})
	r.Archive = true
	commit(t, db, r, makeRecord(t, "globex", 7, SinkBinding{Type: "http"}))
	want := db.Counts()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rawEdit(t, dir, func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
		wb := grocksdb.NewWriteBatch()
		defer wb.Destroy()
		for ord := uint32(0); ord < 4; ord++ {
			wb.DeleteCF(cfs[cfDefault], appendCounterKey(nil, ord))
		}
		wb.DeleteCF(cfs[cfDefault], []byte(metaArchive))
		wb.PutCF(cfs[cfDefault], []byte(metaFormatVersion), []byte{0, 0, 0, 1})
		return rdb.Write(wo, wb)
	})
	db = openTest(t, dir, nil)
	if got := db.Counts(); got != want || got.Pending != 3 || got.ArchivePending != 1 {
		t.Fatalf("counts after migration %+v, want %+v", got, want)
	}
	requireExactCounters(t, db)
	v, err := db.getCF(cfDefault, []byte(metaFormatVersion))
	if err != nil || len(v) != 4 || v[3] != FormatVersion {
		t.Fatalf("format after migration %x, %v", v, err)
	}
}

// Inventory K.4: a counter that cannot be read refuses the open instead of reporting an empty queue.
func TestCorruptCountersRefuseToOpen(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	commit(t, db, makeRecord(t, "acme", 5, SinkBinding{Type: "http"}))
	ord := ordOf(t, db, "acme")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rawEdit(t, dir, func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
		return rdb.PutCF(wo, cfs[cfDefault], appendCounterKey(nil, ord), []byte{1, 2, 3})
	})
	requireOpenRefused(t, dir)
}

// A closed store answers ErrClosed (or zero values where there is no error) from every dispatch call.
func TestClosedStoreRefusesDispatchCalls(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	commit(t, db, makeRecord(t, "acme", 5, SinkBinding{Type: "http"}))
	ord := ordOf(t, db, "acme")
	got := claim(t, db, ord, farFuture(), 1, 0)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("%s after Close: %v", name, err)
		}
	}
	_, err := db.ClaimDue(ord, farFuture(), 1, 0, nil)
	f("ClaimDue", err)
	f("Complete", db.Complete(&got[0]))
	f("Reschedule", db.Reschedule(&got[0], 1, 1, ""))
	f("Bury", db.Bury(&got[0], 1, "", 1))
	_, err = db.RecoverInflight()
	f("RecoverInflight", err)
	_, _, err = db.NextDue(ord)
	f("NextDue", err)
	_, _, err = db.OldestDue()
	f("OldestDue", err)
	_, err = db.ListDead("", 1)
	f("ListDead", err)
	_, err = db.LaneBlocks()
	f("LaneBlocks", err)
	f("SetLaneBlock", db.SetLaneBlock(LaneKey{}, LaneBlock{}))
	f("ClearLaneBlock", db.ClearLaneBlock(LaneKey{}))
	f("PutReplayJob", db.PutReplayJob(&ReplayJob{}))
	_, err = db.ReplayJobs()
	f("ReplayJobs", err)
	_, err = db.ReplayDeadStep(&ReplayJob{}, 1, 1)
	f("ReplayDeadStep", err)
	if c := db.Counts(); c != (Counts{}) {
		t.Fatalf("Counts after Close: %+v", c)
	}
	if a := db.ActiveTenants(nil); len(a) != 0 {
		t.Fatalf("ActiveTenants after Close: %v", a)
	}
	if _, ok := db.TenantName(ord); ok {
		t.Fatal("TenantName answered after Close")
	}
}

// Seed: "The scan costs the tenants with work due": OldestDue looks only at active tenants, and NextDue finds a
// tenant's head after claims deleted the keys before it.
func TestOldestDueIsTheEarliestOverActiveTenants(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	if _, ok, err := db.OldestDue(); ok || err != nil {
		t.Fatalf("OldestDue of an empty store: %v, %v", ok, err)
	}
	commit(t, db, makeRecord(t, "a", 1, SinkBinding{Type: "http"}), makeRecord(t, "a", 1, SinkBinding{Type: "http"}))
	commit(t, db, makeRecord(t, "b", 1, SinkBinding{Type: "http"}))
	a, b := ordOf(t, db, "a"), ordOf(t, db, "b")
	atA, _, _ := db.NextDue(a)
	got := claim(t, db, a, farFuture(), 2, 0)
	if err := db.Reschedule(&got[1], 1, atA-10, "retry"); err != nil { // below the head the claim left
		t.Fatal(err)
	}
	if at, ok, err := db.NextDue(a); err != nil || !ok || at != atA-10 {
		t.Fatalf("NextDue(a) = %d, %v, %v; want %d", at, ok, err, atA-10)
	}
	if at, ok, err := db.OldestDue(); err != nil || !ok || at != atA-10 {
		t.Fatalf("OldestDue = %d, %v, %v; want %d", at, ok, err, atA-10)
	}
	if again := claim(t, db, a, farFuture(), 5, 0); len(again) != 1 || again[0].Seq != got[1].Seq {
		t.Fatalf("reclaim below the head: %v", seqs(again))
	}
	atB, _, _ := db.NextDue(b)
	if at, ok, err := db.OldestDue(); err != nil || !ok || at != atB {
		t.Fatalf("OldestDue with only b waiting = %d, %v, %v; want %d", at, ok, err, atB)
	}
}

// A claim carries each row's hook, so an attempt reads nothing more: rows met out of key order (a retry due
// after later hooks) get theirs too, the rows of one hook share it, and a row whose hook cannot be read gets
// none (the attempt reads it and dead-letters the row).
func TestClaimDueCarriesTheHooks(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	http := SinkBinding{Index: 0, Type: "http"}
	recs := []*Record{makeRecord(t, "acme", 10, http), makeRecord(t, "acme", 20, http, SinkBinding{Index: 1, Type: "log"}),
		makeRecord(t, "acme", 30, http), makeRecord(t, "acme", 40, http)}
	first := commit(t, db, recs...)
	ord := ordOf(t, db, "acme")
	// The first hook's row is retried: due after every other row, so the claim meets it last.
	c := claim(t, db, ord, farFuture(), 1, 0)
	if len(c) != 1 || c[0].Seq != first {
		t.Fatalf("claimed %v, want [%d]", seqs(c), first)
	}
	if err := db.Reschedule(&c[0], 1, time.Now().Add(time.Minute).UnixMilli(), "boom"); err != nil {
		t.Fatal(err)
	}
	if err := db.rdb.DeleteCF(db.wo, db.cfs[cfHooks], AppendHookKey(nil, first+2)); err != nil {
		t.Fatal(err)
	}
	got := claim(t, db, ord, farFuture(), 10, 0)
	if want := []uint64{first + 1, first + 1, first + 2, first + 3, first}; !slices.Equal(seqs(got), want) {
		t.Fatalf("claimed %v, want %v", seqs(got), want)
	}
	for i, c := range got {
		if c.Seq == first+2 {
			if c.Hook != nil {
				t.Fatalf("row %d/%d carries a hook that is gone: %+v", c.Seq, c.Sink, c.Hook)
			}
			continue
		}
		if c.Hook == nil {
			t.Fatalf("row %d/%d carries no hook", c.Seq, c.Sink)
		}
		want, err := DecodeHook(recs[c.Seq-first].Value)
		if err != nil {
			t.Fatal(err)
		}
		if c.Hook.ID != want.ID || !bytes.Equal(c.Hook.Body, want.Body) || c.Hook.ContentType != want.ContentType ||
			!slices.Equal(c.Hook.Headers, want.Headers) {
			t.Fatalf("row %d/%d carries %+v, want %+v", c.Seq, c.Sink, c.Hook, want)
		}
		if i == 1 && c.Hook != got[0].Hook {
			t.Fatal("the two rows of one hook read it twice")
		}
	}
	requireExactCounters(t, db)
}
