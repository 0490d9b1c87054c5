package store

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"
)

// penEntry is a hook of source received at receivedAt (unix ms) with a body of size bytes, held because its
// signature did not match. It never fails the test, so goroutines a test starts may call it.
func penEntry(t testing.TB, source string, receivedAt int64, size int) QuarantineEntry {
	t.Helper()
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i * 7) // every byte value, NUL and 0xff included
	}
	return QuarantineEntry{
		Hook: Hook{ID: newID(), ReceivedAt: receivedAt, Tenant: "acme", Source: source,
			ContentType: "application/json", Headers: []Header{{"x-signature", "sha256=bad"}, {"x-empty", ""}},
			Body: body},
		Method: "POST",
		Path:   "/in/" + source,
		Reason: "no_match",
	}
}

// sz is what entries cost the pen's budgets: their stored sizes.
func sz(es ...QuarantineEntry) int64 {
	var n int64
	for i := range es {
		n += int64(QuarantineEntrySize(&es[i]))
	}
	return n
}

func putPen(t testing.TB, db *DB, maxBytes int64, entries ...QuarantineEntry) {
	t.Helper()
	if err := db.PutQuarantine(entries, maxBytes); err != nil {
		t.Fatalf("PutQuarantine: %v", err)
	}
}

// releaseRecord is the record a quarantine replay job commits for e: its own hook under its original id.
func releaseRecord(e *QuarantineEntry, sinks ...SinkBinding) *Record {
	return &Record{ID: e.Hook.ID, Tenant: e.Hook.Tenant, Source: e.Hook.Source, ReceivedAt: e.Hook.ReceivedAt,
		Size: uint32(len(e.Hook.Body)), Value: AppendHook(nil, &e.Hook), Sinks: sinks}
}

// requirePen fails unless QuarantineStats reports bytes and count and both equal a recount of the pen: its
// summaries (their sizes) and its body keys.
func requirePen(t testing.TB, db *DB, bytes, count int64) {
	t.Helper()
	gb, gc := db.QuarantineStats()
	if gb != bytes || gc != count {
		t.Fatalf("QuarantineStats() = %d bytes, %d entries; want %d, %d", gb, gc, bytes, count)
	}
	list, err := db.ListQuarantine("", math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, s := range list {
		sum += int64(s.Size)
	}
	bodies := 0
	if err := db.read(func() error {
		return db.scan(cfQuarantine, []byte{penBody}, func(_, _ []byte) error { bodies++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if int64(len(list)) != count || int64(bodies) != count || sum != bytes {
		t.Fatalf("pen holds %d summaries of %d bytes and %d bodies; counters say %d entries, %d bytes", len(list),
			sum, bodies, count, bytes)
	}
}

func requireHeld(t testing.TB, db *DB, want *QuarantineEntry) {
	t.Helper()
	got, err := db.GetQuarantine(want.Hook.ReceivedAt, want.Hook.ID)
	if err != nil {
		t.Fatalf("GetQuarantine(%x): %v", want.Hook.ID[:4], err)
	}
	w := *want
	got.Hook, w.Hook = normHook(got.Hook), normHook(w.Hook)
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("GetQuarantine returned\n%+v\nwant\n%+v", got, *want)
	}
}

func requireNotHeld(t testing.TB, db *DB, e *QuarantineEntry) {
	t.Helper()
	if _, err := db.GetQuarantine(e.Hook.ReceivedAt, e.Hook.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetQuarantine(%x) = %v, want ErrNotFound", e.Hook.ID[:4], err)
	}
}

func listIDs(t testing.TB, db *DB, source string, limit int) [][16]byte {
	t.Helper()
	list, err := db.ListQuarantine(source, limit)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([][16]byte, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return ids
}

// Inventory E.8: "Two keys per entry (summary, whole envelope: method, path, headers, body, tenant) in one synced
// batch; survives restart including its byte count". Inventory B: GET /v1/quarantine lists the pen newest first,
// no bodies: {id, source_id, tenant_id, received_at, reason, size}.
func TestQuarantineEntriesRoundTripAndSurviveRestartWithTheirByteCount(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	old := penEntry(t, "stripe", 1_000, 300)
	mid := penEntry(t, "github", 2_000, 0)
	mid.Hook.Headers = nil
	mid.Method, mid.Path = "PUT", "/in/github?x=1"
	newest := penEntry(t, "stripe", 3_000, 4096)
	putPen(t, db, 0, mid, newest)
	putPen(t, db, 0, old)
	entries := []*QuarantineEntry{&old, &mid, &newest}

	check := func() {
		t.Helper()
		requirePen(t, db, sz(old, mid, newest), 3)
		for _, e := range entries {
			requireHeld(t, db, e)
		}
		list, err := db.ListQuarantine("", 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []QuarantineSummary{summaryOf(&newest), summaryOf(&mid), summaryOf(&old)}
		if !reflect.DeepEqual(list, want) {
			t.Fatalf("ListQuarantine = %+v\nwant newest first %+v", list, want)
		}
		if got := listIDs(t, db, "stripe", 10); !slices.Equal(got, [][16]byte{newest.Hook.ID, old.Hook.ID}) {
			t.Fatalf("stripe's entries %x, want newest then old", got)
		}
		if got := listIDs(t, db, "", 1); !slices.Equal(got, [][16]byte{newest.Hook.ID}) {
			t.Fatalf("limit 1 lists %x, want the newest", got)
		}
		if got := listIDs(t, db, "nobody", 10); len(got) != 0 {
			t.Fatalf("an unknown source lists %x", got)
		}
		if _, err := db.GetQuarantine(old.Hook.ReceivedAt+1, old.Hook.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetQuarantine at another time = %v, want ErrNotFound", err)
		}
	}
	check()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	check()
}

// Seed, Quarantine row: "a cap on its total bytes (quarantine.max_bytes; a full pen answers 503 quarantine_full
// and never evicts a held hook)".
func TestFullPenRefusesTheWholePutAndNeverEvicts(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	a, b := penEntry(t, "s", 1, 600), penEntry(t, "s", 2, 400)
	limit := sz(a, b)
	putPen(t, db, limit, a, b) // exactly at the cap: accepted
	c, d := penEntry(t, "s", 3, 1), penEntry(t, "s", 4, 0)
	if err := db.PutQuarantine([]QuarantineEntry{d, c}, limit); !errors.Is(err, ErrQuarantineFull) {
		t.Fatalf("a put past the cap = %v, want ErrQuarantineFull", err)
	}
	requirePen(t, db, limit, 2)
	requireHeld(t, db, &a)
	requireHeld(t, db, &b)
	requireNotHeld(t, db, &c)
	requireNotHeld(t, db, &d) // refused whole: the empty body that would fit went with it

	n, freed, err := db.PurgeQuarantine("", a.Hook.ID, 0, 0, 10)
	if err != nil || n != 1 || freed != sz(a) {
		t.Fatalf("purge of a = %d entries, %d bytes, %v; want 1, %d", n, freed, err, sz(a))
	}
	requirePen(t, db, sz(b), 1)
	putPen(t, db, limit, c, d)
	requirePen(t, db, sz(b, c, d), 3)
	e := penEntry(t, "s", 5, 5000)
	putPen(t, db, 0, e) // 0: no cap
	requirePen(t, db, sz(b, c, d, e), 4)
}

// Seed, Quarantine row: "a store that cannot write is a 503 that spends no token": a failed put writes nothing
// and leaves the counters as they were.
func TestFailedPutWritesNothing(t *testing.T) {
	dir := t.TempDir()
	g := newGate()
	db := openTest(t, dir, &Faults{BeforeCommit: g.beforeCommit})
	a := penEntry(t, "s", 1, 10)
	putPen(t, db, 0, a)
	g.failNext(syscall.EIO)
	b := penEntry(t, "s", 2, 20)
	var we *WriteError
	if err := db.PutQuarantine([]QuarantineEntry{b}, 0); !errors.As(err, &we) || we.Class != ClassIOError {
		t.Fatalf("put under a failing store = %v, want an io_error WriteError", err)
	}
	requirePen(t, db, sz(a), 1)
	requireNotHeld(t, db, &b)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	requirePen(t, db, sz(a), 1)
}

// The pen's counters equal its entries (doc.go invariant 10): putting a hook it already holds, in one call or
// two, holds it once.
func TestPutOfAHeldEntryHoldsItOnce(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	a := penEntry(t, "s", 7, 100)
	putPen(t, db, 0, a, a)
	putPen(t, db, 0, a)
	requirePen(t, db, sz(a), 1)
	if err := db.PutQuarantine([]QuarantineEntry{a}, sz(a)); err != nil {
		t.Fatalf("a put of a held entry into a full pen = %v, want nil (nothing new to hold)", err)
	}
	neg := penEntry(t, "s", -1, 1)
	if err := db.PutQuarantine([]QuarantineEntry{neg}, 0); !errors.Is(err, ErrBadKey) {
		t.Fatalf("a negative receive time = %v, want ErrBadKey", err)
	}
	requirePen(t, db, sz(a), 1)
}

// Inventory B: "DELETE /v1/quarantine?source_id=&id=&since=&until=&limit= purge oldest-first ...
// {"deleted":n,"bytes":b}"; seed: "DELETE /v1/quarantine purges the rest".
func TestPurgeDeletesOldestFirstWithinEveryFilter(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	var es []QuarantineEntry
	var total int64
	for i := range 10 {
		src := "a"
		if i%2 == 1 {
			src = "b"
		}
		e := penEntry(t, src, int64(1000+100*i), 10+i)
		es = append(es, e)
		total += sz(e)
	}
	slices.Reverse(es) // put order does not matter: the keys sort by receive time
	putPen(t, db, 0, es...)
	slices.Reverse(es) // es[i] received at 1000+100i, source a for even i
	requirePen(t, db, total, 10)

	purge := func(source string, id [16]byte, since, until int64, limit int, want ...int) {
		t.Helper()
		n, freed, err := db.PurgeQuarantine(source, id, since, until, limit)
		if err != nil {
			t.Fatal(err)
		}
		var wantBytes int64
		for _, i := range want {
			wantBytes += sz(es[i])
			requireNotHeld(t, db, &es[i])
		}
		if n != len(want) || freed != wantBytes {
			t.Fatalf("purge(%q, %x, %d, %d, %d) = %d entries, %d bytes; want %v (%d bytes)", source, id[:2], since,
				until, limit, n, freed, want, wantBytes)
		}
		total -= freed
	}
	purge("a", [16]byte{}, 0, 0, 2, 0, 2)          // the two oldest of a
	purge("", es[5].Hook.ID, 0, 0, 10, 5)          // one id
	purge("", es[3].Hook.ID, 1400, 0, 10)          // an id outside the window: nothing
	purge("", [16]byte{}, 1300, 1600, 10, 3, 4, 6) // the window, bounds included (5 is gone)
	purge("b", [16]byte{}, 0, 1600, 10, 1)         // b up to 1600: 3 and 5 are gone already
	purge("", [16]byte{}, 0, 0, 0)                 // limit 0 purges nothing
	requirePen(t, db, total, 3)
	if got := listIDs(t, db, "", 10); !slices.Equal(got, [][16]byte{es[9].Hook.ID, es[8].Hook.ID, es[7].Hook.ID}) {
		t.Fatalf("left %x, want entries 9, 8, 7", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	requirePen(t, db, total, 3)
	purge("", [16]byte{}, 0, 0, 1000, 7, 8, 9)
	requirePen(t, db, 0, 0)
}

// Seed, Quarantine row: "A quarantine replay job ... commits the ones that pass with their original id";
// inventory E.8: "release commits with original id + deletes pen entry in one synced batch". The release is a
// commit like any other: seqs stay dense across it, delivery rows and counters are written with it.
func TestReleaseCommitsTheHookWithItsOriginalIDAndDeletesTheEntry(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	e := penEntry(t, "stripe", 1_700_000_000_000, 256)
	other := penEntry(t, "stripe", 1_700_000_000_001, 44)
	putPen(t, db, 0, e, other)
	before := commit(t, db, makeRecord(t, "acme", 8, SinkBinding{Type: "http"}))

	rec := releaseRecord(&e, SinkBinding{Index: 0, Type: "http"}, SinkBinding{Index: 3, Type: "kafka"})
	rec.Archive = true
	out, err := db.ReleaseQuarantine(e.Hook.ReceivedAt, e.Hook.ID, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != OutcomeCommitted || out.Seq != before+1 || rec.Outcome != out {
		t.Fatalf("release outcome %+v (record %+v), want committed at seq %d", out, rec.Outcome, before+1)
	}
	check := func() {
		t.Helper()
		h, err := db.GetHook(out.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normHook(h), normHook(e.Hook)) {
			t.Fatalf("released hook\n%+v\nwant the held one\n%+v", h, e.Hook)
		}
		ids, err := db.HookIDs()
		if err != nil || ids[e.Hook.ID] != out.Seq {
			t.Fatalf("HookIDs()[original id] = %d (%v), want %d", ids[e.Hook.ID], err, out.Seq)
		}
		var sinks []uint16
		if err := db.ForEachDelivery(func(seq uint64, r DeliveryRow) error {
			if seq == out.Seq {
				if r.Source != "stripe" || r.ReceivedAt != e.Hook.ReceivedAt || r.Size != 256 {
					t.Errorf("delivery row %+v", r)
				}
				sinks = append(sinks, r.SinkIndex)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sinks, []uint16{0, 3}) {
			t.Fatalf("released hook has delivery rows for sinks %v, want [0 3]", sinks)
		}
		if n, _ := db.CountIndex(IndexArchive); n != 1 {
			t.Fatalf("%d archive obligations, want 1", n)
		}
		requireExactCounters(t, db)
		if c := db.Counts(); c.Pending != 3 || c.PendingBytes != 8+2*256 {
			t.Fatalf("Counts() = %+v, want the released hook's two rows beside the commit's one", c)
		}
		requireNotHeld(t, db, &e)
		requireHeld(t, db, &other)
		requirePen(t, db, sz(other), 1)
	}
	check()
	if _, err := db.ReleaseQuarantine(e.Hook.ReceivedAt, e.Hook.ID, releaseRecord(&e)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second release = %v, want ErrNotFound", err)
	}
	if after := commit(t, db, makeRecord(t, "acme", 8, SinkBinding{Type: "http"})); after != out.Seq+1 {
		t.Fatalf("commit after the release starts at %d, want %d (seqs dense)", after, out.Seq+1)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	if db.NextSeq() != out.Seq+2 {
		t.Fatalf("NextSeq after reopen %d, want %d", db.NextSeq(), out.Seq+2)
	}
	requireNotHeld(t, db, &e)
	requirePen(t, db, sz(other), 1)
}

// Inventory E.8: the release is "one synced batch": when the write fails nothing of it happened, the hook is
// still held and its seq is burned, never reused.
func TestFailedReleaseLeavesTheEntryHeldAndCommitsNothing(t *testing.T) {
	dir := t.TempDir()
	g := newGate()
	db := openTest(t, dir, &Faults{BeforeCommit: g.beforeCommit})
	e := penEntry(t, "stripe", 5_000, 128)
	putPen(t, db, 0, e)
	rec := releaseRecord(&e, SinkBinding{Type: "http"})
	rec.DedupeKey, rec.DedupeTTL = "evt_1", dedupeTTL
	next := db.NextSeq()
	g.failNext(syscall.ENOSPC)
	out, err := db.ReleaseQuarantine(e.Hook.ReceivedAt, e.Hook.ID, rec)
	var we *WriteError
	if !errors.As(err, &we) || we.Class != ClassNoSpace || out != (Outcome{}) || rec.Outcome != (Outcome{}) {
		t.Fatalf("release under a full disk = %+v, %v (record %+v); want a no_space WriteError, no outcome", out,
			err, rec.Outcome)
	}
	check := func() {
		t.Helper()
		requireHeld(t, db, &e)
		requirePen(t, db, sz(e), 1)
		if ids, err := db.HookIDs(); err != nil || len(ids) != 0 {
			t.Fatalf("hooks %v (%v) after a failed release", ids, err)
		}
		if c := db.Counts(); c != (Counts{}) {
			t.Fatalf("Counts() = %+v after a failed release", c)
		}
		if _, ok, _ := db.LookupDedupe("acme", "stripe", "evt_1", time.Now()); ok {
			t.Fatal("a failed release left its dedupe key")
		}
	}
	check()
	if db.NextSeq() != next+1 {
		t.Fatalf("NextSeq %d after a failed release, want %d (burned)", db.NextSeq(), next+1)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	check()
	out, err = db.ReleaseQuarantine(e.Hook.ReceivedAt, e.Hook.ID, releaseRecord(&e, SinkBinding{Type: "http"}))
	if err != nil || out.Status != OutcomeCommitted || out.Seq < next {
		t.Fatalf("release after reopen = %+v, %v; want committed", out, err)
	}
	requirePen(t, db, 0, 0)
}

// Inventory F.5: a quarantine replay commits "with original id (dedupe applies; duplicates leave pen as
// skipped)". A duplicate deletes the entry and commits nothing; a release refused by the dedupe quota writes
// nothing and leaves the entry held for a later try.
func TestReleaseOfADuplicateDeletesTheEntryAndCommitsNothing(t *testing.T) {
	db := openWith(t, Options{Dir: t.TempDir(), DedupeMaxEntries: 2})
	orig := dedupeRecord(t, "acme", "evt_1", dedupeTTL)
	orig.Source = "stripe"
	commitAll(t, db, orig)
	dup, refused := penEntry(t, "stripe", 10, 64), penEntry(t, "stripe", 11, 32)
	putPen(t, db, 0, dup, refused)
	commitAll(t, db, dedupeRecord(t, "acme", "evt_2", dedupeTTL)) // the node's second key: the quota is full
	shape := shapeOf(t, db)

	rec := releaseRecord(&dup, SinkBinding{Type: "http"})
	rec.DedupeKey, rec.DedupeTTL = "evt_1", dedupeTTL
	out, err := db.ReleaseQuarantine(dup.Hook.ReceivedAt, dup.Hook.ID, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != OutcomeDuplicate || out.OriginalID != orig.ID || out.Seq != 0 {
		t.Fatalf("release of a duplicate = %+v, want duplicate of %x", out, orig.ID[:4])
	}
	if got := shapeOf(t, db); got != shape {
		t.Fatalf("a duplicate release changed the store: %+v, was %+v", got, shape)
	}
	requireNotHeld(t, db, &dup)
	requirePen(t, db, sz(refused), 1)

	rec = releaseRecord(&refused, SinkBinding{Type: "http"})
	rec.DedupeKey, rec.DedupeTTL = "evt_3", dedupeTTL
	out, err = db.ReleaseQuarantine(refused.Hook.ReceivedAt, refused.Hook.ID, rec)
	if err != nil || out.Status != OutcomeRefused || !errors.Is(out.Err, ErrDedupeQuota) {
		t.Fatalf("release past the dedupe quota = %+v, %v; want refused with ErrDedupeQuota", out, err)
	}
	if got := shapeOf(t, db); got != shape {
		t.Fatalf("a refused release changed the store: %+v, was %+v", got, shape)
	}
	requireHeld(t, db, &refused)
	requirePen(t, db, sz(refused), 1)
	requireExactCounters(t, db)
}

// A release commits the held hook under its own id: a record of another id is refused before anything is read.
func TestReleaseRefusesARecordOfAnotherID(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	e := penEntry(t, "s", 1, 8)
	putPen(t, db, 0, e)
	rec := releaseRecord(&e)
	rec.ID[0] ^= 1
	if _, err := db.ReleaseQuarantine(e.Hook.ReceivedAt, e.Hook.ID, rec); !errors.Is(err, ErrBadKey) {
		t.Fatalf("release with a record of another id = %v, want ErrBadKey", err)
	}
	requireHeld(t, db, &e)
	requirePen(t, db, sz(e), 1)
}

// Doc.go invariant 10 under concurrency: puts, purges, releases and ingest commits racing each other leave the
// pen's counters equal to its entries and the queue counters equal to the index.
func TestConcurrentPenWritesKeepItsCountersExact(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	const workers, rounds = 4, 12
	var wg sync.WaitGroup
	errs := make(chan error, 4*workers)
	for w := range workers {
		wg.Add(4)
		go func() { // putter and releaser of its own entries
			defer wg.Done()
			for i := range rounds {
				e := penEntry(t, "rel", int64(w*1000+i), 10+i)
				if err := db.PutQuarantine([]QuarantineEntry{e}, 0); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					if _, err := db.ReleaseQuarantine(e.Hook.ReceivedAt, e.Hook.ID,
						releaseRecord(&e, SinkBinding{Type: "http"})); err != nil && !errors.Is(err, ErrNotFound) {
						errs <- err
						return
					}
				}
			}
		}()
		go func() { // putter of entries the purger races for
			defer wg.Done()
			for i := range rounds {
				if err := db.PutQuarantine([]QuarantineEntry{penEntry(t, "junk", int64(w*1000+i), 3),
					penEntry(t, "junk", int64(w*1000+i), 5)}, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // purger
			defer wg.Done()
			for range rounds {
				if _, _, err := db.PurgeQuarantine("junk", [16]byte{}, 0, 0, 3); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // ingest
			defer wg.Done()
			for range rounds / 2 {
				if _, err := db.CommitHooks(makeRecords(t, 3, "acme")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	bytes, count := db.QuarantineStats()
	requirePen(t, db, bytes, count)
	requireExactCounters(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	requirePen(t, db, bytes, count)
}

// Doc.go invariant 2 for the pen: counters that contradict the pen it holds are damage, and refuse the open
// rather than report an empty (or phantom) pen.
func TestPenCountersContradictingThePenRefuseToOpen(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*grocksdb.DB, *grocksdb.WriteOptions, []*grocksdb.ColumnFamilyHandle) error
	}{
		{"count lost", func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
			return rdb.DeleteCF(wo, cfs[cfDefault], []byte(metaPenCount))
		}},
		{"bytes unreadable", func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
			return rdb.PutCF(wo, cfs[cfDefault], []byte(metaPenBytes), []byte{1, 2, 3})
		}},
		{"entries lost", func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
			ro := grocksdb.NewDefaultReadOptions()
			defer ro.Destroy()
			it := rdb.NewIteratorCF(ro, cfs[cfQuarantine])
			defer it.Close()
			var keys [][]byte
			for it.SeekToFirst(); it.Valid(); it.Next() {
				keys = append(keys, bytes.Clone(it.Key().Data()))
			}
			for _, k := range keys {
				if err := rdb.DeleteCF(wo, cfs[cfQuarantine], k); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := openTest(t, dir, nil)
			putPen(t, db, 0, penEntry(t, "s", 1, 9))
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			rawEdit(t, dir, tc.edit)
			requireOpenRefused(t, dir)
		})
	}
}

// Inventory C.4: an undecodable summary is listed (and purgeable), never hidden nor fatal to the listing.
func TestUndecodableSummaryIsListedAndPurged(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	good, bad := penEntry(t, "s", 1, 7), penEntry(t, "s", 2, 5)
	putPen(t, db, 0, good, bad)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rawEdit(t, dir, func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
		return rdb.PutCF(wo, cfs[cfQuarantine], appendPenKey(nil, penSummary, 2, bad.Hook.ID), []byte{penVersion, 9})
	})
	db = openTest(t, dir, nil)
	list, err := db.ListQuarantine("", 10)
	if err != nil || len(list) != 2 || list[0].ID != bad.Hook.ID || list[0].Reason != undecodablePenReason {
		t.Fatalf("ListQuarantine = %+v, %v; want the damaged entry listed as undecodable", list, err)
	}
	if got := listIDs(t, db, "s", 10); !slices.Equal(got, [][16]byte{good.Hook.ID}) {
		t.Fatalf("source filter lists %x, want only the readable entry", got)
	}
	if n, _, err := db.PurgeQuarantine("s", [16]byte{}, 2, 2, 10); err != nil || n != 0 {
		t.Fatalf("source-filtered purge took %d undecodable entries (%v)", n, err)
	}
	if n, _, err := db.PurgeQuarantine("", bad.Hook.ID, 0, 0, 10); err != nil || n != 1 {
		t.Fatalf("purge of the damaged entry = %d, %v", n, err)
	}
	requireHeld(t, db, &good)
	if n, freed, err := db.PurgeQuarantine("", [16]byte{}, 0, 0, 10); err != nil || n != 1 || freed != sz(good) {
		t.Fatalf("purge of the rest = %d, %d, %v", n, freed, err)
	}
	// The damaged entry's bytes could not be told; an empty pen holds none.
	requirePen(t, db, 0, 0)
}

// A closed store answers ErrClosed (zero stats) from every pen call.
func TestClosedStoreRefusesPenCalls(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	e := penEntry(t, "s", 1, 3)
	putPen(t, db, 0, e)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.PutQuarantine([]QuarantineEntry{e}, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("PutQuarantine: %v", err)
	}
	if _, err := db.ListQuarantine("", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("ListQuarantine: %v", err)
	}
	if _, err := db.GetQuarantine(1, e.Hook.ID); !errors.Is(err, ErrClosed) {
		t.Errorf("GetQuarantine: %v", err)
	}
	if _, _, err := db.PurgeQuarantine("", [16]byte{}, 0, 0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("PurgeQuarantine: %v", err)
	}
	if _, err := db.ReleaseQuarantine(1, e.Hook.ID, releaseRecord(&e)); !errors.Is(err, ErrClosed) {
		t.Errorf("ReleaseQuarantine: %v", err)
	}
	if b, n := db.QuarantineStats(); b != 0 || n != 0 {
		t.Errorf("QuarantineStats after Close = %d, %d", b, n)
	}
}

func TestPenCodecsRoundTrip(t *testing.T) {
	e := QuarantineEntry{Hook: sampleHook(), Method: "POST", Path: "/in/stripe?a=b", Reason: "no_match"}
	got, err := DecodeQuarantineEntry(AppendQuarantineEntry(nil, &e))
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("entry round trip = %+v, %v", got, err)
	}
	s := summaryOf(&e)
	gs, err := DecodeQuarantineSummary(AppendQuarantineSummary(nil, &s))
	if err != nil || gs != s {
		t.Fatalf("summary round trip = %+v, %v", gs, err)
	}
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = AppendQuarantineEntry(buf[:0], &e) }); n != 0 {
		t.Fatalf("AppendQuarantineEntry into a sized buffer allocates %v times", n)
	}
	for _, bad := range [][]byte{nil, {2}, append(AppendQuarantineSummary(nil, &s), 0)} {
		if _, err := DecodeQuarantineSummary(bad); !errors.Is(err, ErrCorruptValue) {
			t.Errorf("summary %x decoded: %v", bad, err)
		}
		if _, err := DecodeQuarantineEntry(bad); !errors.Is(err, ErrCorruptValue) {
			t.Errorf("entry %x decoded: %v", bad, err)
		}
	}
	k := appendPenKey(nil, penBody, 1_700_000_000_000, e.Hook.ID)
	if kind, at, id, err := parsePenKey(k); err != nil || kind != penBody || at != 1_700_000_000_000 || id != e.Hook.ID {
		t.Fatalf("parsePenKey = %c %d %x %v", kind, at, id, err)
	}
	if bytes.Compare(appendPenKey(nil, penSummary, 255, e.Hook.ID), appendPenKey(nil, penSummary, 256, [16]byte{})) >= 0 {
		t.Fatal("pen keys do not sort by receive time")
	}
}

func FuzzDecodeQuarantineSummary(f *testing.F) {
	e := QuarantineEntry{Hook: sampleHook(), Reason: "no_match"}
	s := summaryOf(&e)
	f.Add(AppendQuarantineSummary(nil, &s))
	f.Add(AppendQuarantineSummary(nil, &QuarantineSummary{}))
	f.Add([]byte{penVersion, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeQuarantineSummary(b)
		if err != nil {
			return
		}
		// Whatever decodes is a fixed point of encode∘decode.
		again, err := DecodeQuarantineSummary(AppendQuarantineSummary(nil, &s))
		if err != nil || again != s {
			t.Fatalf("%x decodes to %+v, which re-decodes to %+v (%v)", b, s, again, err)
		}
	})
}

func FuzzDecodeQuarantineEntry(f *testing.F) {
	e := QuarantineEntry{Hook: sampleHook(), Method: "POST", Path: "/in/x", Reason: "no_match"}
	f.Add(AppendQuarantineEntry(nil, &e))
	f.Add(AppendQuarantineEntry(nil, &QuarantineEntry{}))
	f.Add([]byte{penVersion, 0, 0, 0, 1})
	f.Add([]byte{penVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeQuarantineEntry(b)
		if err != nil {
			return
		}
		// Whatever decodes is a fixed point of encode∘decode.
		again, err := DecodeQuarantineEntry(AppendQuarantineEntry(nil, &e))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		again.Hook, e.Hook = normHook(again.Hook), normHook(e.Hook)
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("re-decode differs:\n%+v\n%+v", again, e)
		}
	})
}

func FuzzPenKey(f *testing.F) {
	f.Add(appendPenKey(nil, penSummary, 1_700_000_000_000, [16]byte{1}))
	f.Add([]byte{penBody})
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, at, id, err := parsePenKey(b)
		if err != nil {
			return
		}
		if !bytes.Equal(appendPenKey(nil, kind, at, id), b) {
			t.Fatalf("%x parses to %c %d %x, which encodes differently", b, kind, at, id)
		}
	})
}

// requireUsage fails unless QuarantineUsage reports total, forSource and forTenant bytes.
func requireUsage(t testing.TB, db *DB, source, tenant string, total, forSource, forTenant int64) {
	t.Helper()
	gt, gs, gtn := db.QuarantineUsage(source, tenant)
	if gt != total || gs != forSource || gtn != forTenant {
		t.Fatalf("QuarantineUsage(%q, %q) = %d, %d, %d; want %d, %d, %d", source, tenant, gt, gs, gtn, total,
			forSource, forTenant)
	}
}

// The edge's per-source and per-tenant shares read the pen's usage of each: it follows every put, purge, sweep
// and release, and is the same after a restart.
func TestPenUsagePerSourceAndTenantIsExactAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	now := time.Now().UnixMilli()
	a1, a2, b1 := penEntry(t, "a", now-1000, 100), penEntry(t, "a", now-900, 50), penEntry(t, "b", now-800, 30)
	b1.Hook.Tenant = "globex"
	putPen(t, db, 0, a1, a2, b1)
	requireUsage(t, db, "a", "acme", sz(a1, a2, b1), sz(a1, a2), sz(a1, a2))
	requireUsage(t, db, "b", "globex", sz(a1, a2, b1), sz(b1), sz(b1))

	if n, bytes, err := db.PurgeQuarantine("a", a1.Hook.ID, 0, 0, 10); err != nil || n != 1 || bytes != sz(a1) {
		t.Fatalf("purge: %d, %d, %v", n, bytes, err)
	}
	requireUsage(t, db, "a", "acme", sz(a2, b1), sz(a2), sz(a2))
	out, err := db.ReleaseQuarantine(b1.Hook.ReceivedAt, b1.Hook.ID, releaseRecord(&b1))
	if err != nil || out.Status != OutcomeCommitted {
		t.Fatalf("release: %+v, %v", out, err)
	}
	requireUsage(t, db, "b", "globex", sz(a2), 0, 0)

	a3 := penEntry(t, "a", now, 7)
	putPen(t, db, 0, a3)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	requireUsage(t, db, "a", "acme", sz(a2, a3), sz(a2, a3), sz(a2, a3))
	requireUsage(t, db, "b", "globex", sz(a2, a3), 0, 0)
}

// quarantine.retention_seconds: an entry older than the retention leaves the pen, its bytes with it, and an
// entry younger stays.
func TestSweepQuarantineDeletesEntriesOlderThanRetention(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	now := time.Now()
	old1, old2 := penEntry(t, "a", now.Add(-2*time.Hour).UnixMilli(), 10), penEntry(t, "b", now.Add(-90*time.Minute).UnixMilli(), 20)
	young := penEntry(t, "a", now.Add(-time.Minute).UnixMilli(), 40)
	putPen(t, db, 0, old1, old2, young)
	if n, bytes, err := db.SweepQuarantine(now, time.Hour, 1); err != nil || n != 1 || bytes != sz(old1) {
		t.Fatalf("sweep of 1: %d, %d, %v; want the oldest", n, bytes, err)
	}
	if n, bytes, err := db.SweepQuarantine(now, time.Hour, 10); err != nil || n != 1 || bytes != sz(old2) {
		t.Fatalf("second sweep: %d, %d, %v", n, bytes, err)
	}
	if n, _, err := db.SweepQuarantine(now, time.Hour, 10); err != nil || n != 0 {
		t.Fatalf("third sweep deleted %d (%v)", n, err)
	}
	requirePen(t, db, sz(young), 1)
	requireHeld(t, db, &young)
	requireUsage(t, db, "a", "acme", sz(young), sz(young), sz(young))
	requireUsage(t, db, "b", "acme", sz(young), 0, sz(young))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	requirePen(t, db, sz(young), 1)
	requireUsage(t, db, "a", "acme", sz(young), sz(young), sz(young))
	// A retention longer than the clock's past deletes nothing (and is no "unbounded" purge).
	if n, _, err := db.SweepQuarantine(now, time.Duration(math.MaxInt64), 10); err != nil || n != 0 {
		t.Fatalf("sweep with an endless retention deleted %d (%v)", n, err)
	}
}
