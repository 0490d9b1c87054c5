package store

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/linxGnu/grocksdb"
)

const dedupeTTL = 72 * time.Hour

// dedupeRecord is a record of tenant with one sink and the dedupe key key (held for ttl).
func dedupeRecord(t testing.TB, tenant, key string, ttl time.Duration) *Record {
	t.Helper()
	r := makeRecord(t, tenant, 16, SinkBinding{Index: 0, Type: "http"})
	r.DedupeKey, r.DedupeTTL = key, ttl
	return r
}

// storeShape is what a commit could have written: hooks, delivery rows, due keys, dedupe keys and expiry keys,
// and the next seq.
type storeShape struct {
	hooks, deliveries, due, keys, expiries int
	nextSeq                                uint64
}

func shapeOf(t testing.TB, db *DB) storeShape {
	t.Helper()
	s := storeShape{hooks: len(hookTenantSeqs(t, db)), nextSeq: db.NextSeq()}
	if err := db.ForEachDelivery(func(uint64, DeliveryRow) error { s.deliveries++; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prefix byte
		n      *int
	}{{IndexDue, &s.due}, {IndexDedupe, &s.keys}, {IndexDedupeExpiry, &s.expiries}} {
		n, err := db.CountIndex(c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		*c.n = n
	}
	return s
}

func commitAll(t testing.TB, db *DB, recs ...*Record) {
	t.Helper()
	if _, err := db.CommitHooks(recs); err != nil {
		t.Fatalf("CommitHooks: %v", err)
	}
}

func requireOutcome(t testing.TB, r *Record, want OutcomeStatus) {
	t.Helper()
	if r.Outcome.Status != want {
		t.Fatalf("record %x of key %q: outcome %+v, want status %d", r.ID[:4], r.DedupeKey, r.Outcome, want)
	}
}

func requireDuplicateOf(t testing.TB, r, original *Record) {
	t.Helper()
	requireOutcome(t, r, OutcomeDuplicate)
	if r.Outcome.OriginalID != original.ID || r.Outcome.Seq != 0 {
		t.Fatalf("duplicate answers id %x seq %d, want the original's id %x and no seq", r.Outcome.OriginalID[:4],
			r.Outcome.Seq, original.ID[:4])
	}
}

func requireCounts(t testing.TB, db *DB, tenant string, total, forTenant int64) {
	t.Helper()
	if gt, gf := db.DedupeCounts(tenant); gt != total || gf != forTenant {
		t.Fatalf("DedupeCounts(%q) = %d, %d; want %d, %d", tenant, gt, gf, total, forTenant)
	}
}

// waitExpired polls until LookupDedupe no longer finds the key: a key with a 1 ms TTL is then past its expiry
// for every later commit too (commit times never go backwards).
func waitExpired(t testing.TB, db *DB, tenant, source, key string) {
	t.Helper()
	poll.True(t, 5*time.Second, "the dedupe key to expire", func() bool {
		_, ok, err := db.LookupDedupe(tenant, source, key, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return !ok
	})
}

// Seed, Ingest row: "A source with dedupe: collapses hooks sharing a provider event key within the TTL (default
// 72 h): the repeat gets 201 with the original id and "duplicate": true, and nothing new is stored." Inventory
// E.4: the scope is (tenant, source, key).
func TestDuplicateWithinTTLAnswersTheOriginalIDAndStoresNothing(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	orig := dedupeRecord(t, "acme", "evt_1", dedupeTTL)
	first, err := db.CommitHooks([]*Record{orig})
	if err != nil {
		t.Fatal(err)
	}
	requireOutcome(t, orig, OutcomeCommitted)
	if orig.Outcome.Seq != first {
		t.Fatalf("committed seq %d, CommitHooks returned %d", orig.Outcome.Seq, first)
	}
	if id, ok, err := db.LookupDedupe("acme", "src", "evt_1", time.Now()); err != nil || !ok || id != orig.ID {
		t.Fatalf("LookupDedupe = %x, %v, %v; want the original's id", id[:4], ok, err)
	}
	before := shapeOf(t, db)

	repeat := dedupeRecord(t, "acme", "evt_1", dedupeTTL)
	next, err := db.CommitHooks([]*Record{repeat})
	if err != nil {
		t.Fatal(err)
	}
	requireDuplicateOf(t, repeat, orig)
	if after := shapeOf(t, db); after != before || next != before.nextSeq {
		t.Fatalf("a duplicate changed the store: %+v -> %+v (returned seq %d)", before, after, next)
	}
	ids, err := db.HookIDs()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ids[repeat.ID]; ok {
		t.Fatal("the duplicate's hook was stored")
	}

	// The scope is (tenant, source, key): the same key elsewhere is a new hook; a record with a key but no TTL
	// is not deduplicated and writes no key.
	otherSource := dedupeRecord(t, "acme", "evt_1", dedupeTTL)
	otherSource.Source = "src2"
	otherTenant := dedupeRecord(t, "globex", "evt_1", dedupeTTL)
	noTTL := dedupeRecord(t, "acme", "evt_1", 0)
	commitAll(t, db, otherSource, otherTenant, noTTL)
	for _, r := range []*Record{otherSource, otherTenant, noTTL} {
		requireOutcome(t, r, OutcomeCommitted)
	}
	requireCounts(t, db, "acme", 3, 2)
	if got := shapeOf(t, db); got.keys != 3 || got.expiries != 3 || got.hooks != before.hooks+3 {
		t.Fatalf("after three new hooks (two with keys in new scopes): %+v", got)
	}
}

// Inventory K.10 / seed batcher row: "the writer re-validates it before it assigns seqs: the first occurrence of
// a key wins, and later ones answer duplicate with its hook id", and seqs stay dense over what is committed.
func TestFirstOccurrenceOfAKeyWinsWithinOneGroup(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	a := dedupeRecord(t, "acme", "k", dedupeTTL)
	plain := makeRecord(t, "acme", 16, SinkBinding{Type: "http"})
	b := dedupeRecord(t, "acme", "k", dedupeTTL)
	c := dedupeRecord(t, "acme", "k2", dedupeTTL)
	d := dedupeRecord(t, "acme", "k2", dedupeTTL)
	first, err := db.CommitHooks([]*Record{a, plain, b, c, d})
	if err != nil {
		t.Fatal(err)
	}
	requireDuplicateOf(t, b, a)
	requireDuplicateOf(t, d, c)
	for i, r := range []*Record{a, plain, c} {
		requireOutcome(t, r, OutcomeCommitted)
		if r.Outcome.Seq != first+uint64(i) {
			t.Fatalf("committed record %d has seq %d, want %d: seqs are not dense over the committed records",
				i, r.Outcome.Seq, first+uint64(i))
		}
	}
	if db.NextSeq() != first+3 {
		t.Fatalf("NextSeq %d, want %d: duplicates burned seqs", db.NextSeq(), first+3)
	}
	ids, err := db.HookIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[a.ID] != first || ids[c.ID] != first+2 {
		t.Fatalf("stored hooks %v, want exactly the three committed", ids)
	}
	requireCounts(t, db, "acme", 2, 2)
}

// Seed, Ingest row: the TTL bounds the window; a key past it lets the same event in as a new hook, which then
// holds the key.
func TestExpiredKeyAdmitsANewHook(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	old := dedupeRecord(t, "acme", "k", time.Millisecond)
	commitAll(t, db, old)
	waitExpired(t, db, "acme", "src", "k")

	fresh := dedupeRecord(t, "acme", "k", dedupeTTL)
	commitAll(t, db, fresh)
	requireOutcome(t, fresh, OutcomeCommitted)
	if fresh.Outcome.Seq != old.Outcome.Seq+1 {
		t.Fatalf("new hook seq %d after %d", fresh.Outcome.Seq, old.Outcome.Seq)
	}
	if id, ok, err := db.LookupDedupe("acme", "src", "k", time.Now()); err != nil || !ok || id != fresh.ID {
		t.Fatalf("LookupDedupe = %x, %v, %v; want the new hook's id", id[:4], ok, err)
	}
	// The new hook took the expired key's place: still one key, and the old expiry key waits for the sweeper.
	requireCounts(t, db, "acme", 1, 1)
	if s := shapeOf(t, db); s.keys != 1 || s.expiries != 2 || s.hooks != 2 {
		t.Fatalf("after the refresh: %+v", s)
	}
	repeat := dedupeRecord(t, "acme", "k", dedupeTTL)
	commitAll(t, db, repeat)
	requireDuplicateOf(t, repeat, fresh)
}

// Seed, Ingest row: "keys are expired by a DedupeSweeper, never inside the writer"; the counters follow.
func TestSweepDeletesExpiredKeysAndCountersDrop(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var short []*Record
	for _, k := range []string{"a", "b", "c"} {
		short = append(short, dedupeRecord(t, "acme", k, time.Minute))
	}
	long := dedupeRecord(t, "acme", "long", dedupeTTL)
	other := dedupeRecord(t, "globex", "a", time.Minute)
	commitAll(t, db, append(short, long, other)...)
	requireCounts(t, db, "acme", 5, 4)

	if n, err := db.SweepDedupe(time.Now(), 100); err != nil || n != 0 {
		t.Fatalf("sweep before any expiry deleted %d (%v)", n, err)
	}
	later := time.Now().Add(2 * time.Minute)
	n, err := db.SweepDedupe(later, 2)
	if err != nil || n != 2 {
		t.Fatalf("sweep with limit 2 deleted %d (%v), want 2", n, err)
	}
	total, _ := db.DedupeCounts("acme")
	if total != 3 {
		t.Fatalf("%d keys left after deleting 2 of 5", total)
	}
	if n, err = db.SweepDedupe(later, 100); err != nil || n != 2 {
		t.Fatalf("second sweep deleted %d (%v), want the 2 left expired", n, err)
	}
	requireCounts(t, db, "acme", 1, 1)
	requireCounts(t, db, "globex", 1, 0)
	if s := shapeOf(t, db); s.keys != 1 || s.expiries != 1 {
		t.Fatalf("after the sweeps: %+v, want only the long key and its expiry", s)
	}
	if _, ok, _ := db.LookupDedupe("acme", "src", "long", later); !ok {
		t.Fatal("the unexpired key was swept")
	}
	// The hooks themselves are untouched, and a swept key admits the event again.
	if s := shapeOf(t, db); s.hooks != 5 {
		t.Fatalf("the sweep touched hooks: %+v", s)
	}
	again := dedupeRecord(t, "acme", "a", dedupeTTL)
	commitAll(t, db, again)
	requireOutcome(t, again, OutcomeCommitted)
	requireCounts(t, db, "acme", 2, 2)
}

// Seed, Ingest row / inventory: "a key refreshed after the sweeper read it survives its stale delete". The
// fault hook runs between the sweeper's read of the expiry keys and its locked re-read, and refreshes the key.
func TestKeyRefreshedAfterTheSweeperReadItSurvivesTheStaleDelete(t *testing.T) {
	var between func()
	db := openTest(t, t.TempDir(), &Faults{AfterDedupeScan: func() {
		if between != nil {
			between()
		}
	}})
	old := dedupeRecord(t, "acme", "k", time.Millisecond)
	commitAll(t, db, old)
	waitExpired(t, db, "acme", "src", "k")

	fresh := dedupeRecord(t, "acme", "k", dedupeTTL)
	ran := false
	between = func() {
		ran = true
		commitAll(t, db, fresh)
	}
	n, err := db.SweepDedupe(time.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the sweep never reached its fault hook")
	}
	requireOutcome(t, fresh, OutcomeCommitted)
	if n != 0 {
		t.Fatalf("the sweep deleted %d keys; the refreshed key must survive", n)
	}
	if id, ok, err := db.LookupDedupe("acme", "src", "k", time.Now()); err != nil || !ok || id != fresh.ID {
		t.Fatalf("after the stale delete LookupDedupe = %x, %v, %v; want the refreshed key", id[:4], ok, err)
	}
	requireCounts(t, db, "acme", 1, 1)
	if s := shapeOf(t, db); s.keys != 1 || s.expiries != 1 {
		t.Fatalf("after the sweep: %+v, want the key and only its new expiry", s)
	}

	// Its own expiry key deletes it once due.
	between = nil
	if n, err := db.SweepDedupe(time.Now().Add(dedupeTTL+time.Minute), 100); err != nil || n != 1 {
		t.Fatalf("sweep past the new expiry deleted %d (%v), want 1", n, err)
	}
	requireCounts(t, db, "acme", 0, 0)
}

// Seed, Ingest row: "dedupe.max_entries live keys on the node and dedupe.max_entries_per_tenant for one tenant;
// a hook whose key would pass either is refused 503 dedupe_quota, never stored without its key."
func TestDedupeQuotasRefuseNewKeysButDuplicatesStillAnswer(t *testing.T) {
	db := openWith(t, Options{Dir: t.TempDir(), DedupeMaxEntries: 3, DedupeMaxEntriesPerTenant: 2})
	k1, k2 := dedupeRecord(t, "acme", "k1", dedupeTTL), dedupeRecord(t, "acme", "k2", dedupeTTL)
	commitAll(t, db, k1, k2)
	requireCounts(t, db, "acme", 2, 2)

	// acme is at its quota: a new key is refused, in a group with a duplicate and a record without a key.
	k3 := dedupeRecord(t, "acme", "k3", dedupeTTL)
	k3again := dedupeRecord(t, "acme", "k3", dedupeTTL)
	dup := dedupeRecord(t, "acme", "k1", dedupeTTL)
	plain := makeRecord(t, "acme", 16, SinkBinding{Type: "http"})
	before := shapeOf(t, db)
	first, err := db.CommitHooks([]*Record{k3, dup, k3again, plain})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Record{k3, k3again} {
		requireOutcome(t, r, OutcomeRefused)
		if !errors.Is(r.Outcome.Err, ErrDedupeQuota) {
			t.Fatalf("refused with %v, want ErrDedupeQuota", r.Outcome.Err)
		}
	}
	requireDuplicateOf(t, dup, k1)
	requireOutcome(t, plain, OutcomeCommitted)
	if plain.Outcome.Seq != first || first != before.nextSeq {
		t.Fatalf("the one committed record has seq %d (first %d), want %d", plain.Outcome.Seq, first, before.nextSeq)
	}
	after := shapeOf(t, db)
	if after.hooks != before.hooks+1 || after.keys != before.keys || after.nextSeq != before.nextSeq+1 {
		t.Fatalf("refused records left traces: %+v -> %+v", before, after)
	}
	if _, ok, _ := db.LookupDedupe("acme", "src", "k3", time.Now()); ok {
		t.Fatal("a refused record's key was written")
	}

	// Another tenant is not held by acme's quota, until the node's quota is reached.
	g1 := dedupeRecord(t, "globex", "k1", dedupeTTL)
	commitAll(t, db, g1)
	requireOutcome(t, g1, OutcomeCommitted)
	requireCounts(t, db, "globex", 3, 1)
	i1 := dedupeRecord(t, "initech", "k1", dedupeTTL)
	g2 := dedupeRecord(t, "globex", "k2", dedupeTTL)
	gdup := dedupeRecord(t, "globex", "k1", dedupeTTL)
	commitAll(t, db, i1, g2, gdup)
	requireOutcome(t, i1, OutcomeRefused)
	requireOutcome(t, g2, OutcomeRefused)
	requireDuplicateOf(t, gdup, g1)
	requireCounts(t, db, "initech", 3, 0)

	// Sweeping frees the quota.
	if n, err := db.SweepDedupe(time.Now().Add(dedupeTTL+time.Minute), 100); err != nil || n != 3 {
		t.Fatalf("sweep deleted %d (%v), want 3", n, err)
	}
	k3 = dedupeRecord(t, "acme", "k3", dedupeTTL)
	commitAll(t, db, k3)
	requireOutcome(t, k3, OutcomeCommitted)
}

// Invariant 7 applied to the dedupe counters: they are persisted with the batches that change them, so they
// survive a restart and the quotas hold across it.
func TestDedupeCountersSurviveCloseAndOpen(t *testing.T) {
	dir := t.TempDir()
	db := openWith(t, Options{Dir: dir, DedupeMaxEntriesPerTenant: 3})
	commitAll(t, db,
		dedupeRecord(t, "acme", "a", time.Minute), dedupeRecord(t, "acme", "b", dedupeTTL),
		dedupeRecord(t, "acme", "c", dedupeTTL), dedupeRecord(t, "globex", "a", time.Minute))
	if n, err := db.SweepDedupe(time.Now().Add(2*time.Minute), 100); err != nil || n != 2 {
		t.Fatalf("sweep deleted %d (%v), want 2", n, err)
	}
	requireCounts(t, db, "acme", 2, 2)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	requireCounts(t, db, "acme", 0, 0) // a closed store answers zero

	db = openWith(t, Options{Dir: dir, DedupeMaxEntriesPerTenant: 3})
	requireCounts(t, db, "acme", 2, 2)
	requireCounts(t, db, "globex", 2, 0)
	if s := shapeOf(t, db); s.keys != 2 {
		t.Fatalf("%d dedupe keys in the index, counters say 2", s.keys)
	}
	d, e := dedupeRecord(t, "acme", "d", dedupeTTL), dedupeRecord(t, "acme", "e", dedupeTTL)
	commitAll(t, db, d, e)
	requireOutcome(t, d, OutcomeCommitted)
	requireOutcome(t, e, OutcomeRefused)
}

// A scope the key layout cannot encode is refused for its record alone, never written ambiguously.
func TestUnencodableScopeIsRefusedAlone(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	bad := dedupeRecord(t, "ac\x00me", "k", dedupeTTL)
	long := dedupeRecord(t, "acme", "k", dedupeTTL)
	long.Source = strings.Repeat("s", math.MaxUint16+1)
	good := dedupeRecord(t, "acme", "k", dedupeTTL)
	commitAll(t, db, bad, long, good)
	for _, r := range []*Record{bad, long} {
		requireOutcome(t, r, OutcomeRefused)
		if !errors.Is(r.Outcome.Err, ErrBadKey) {
			t.Fatalf("refused with %v, want ErrBadKey", r.Outcome.Err)
		}
	}
	requireOutcome(t, good, OutcomeCommitted)
	if _, _, err := db.LookupDedupe("ac\x00me", "src", "k", time.Now()); !errors.Is(err, ErrBadKey) {
		t.Fatalf("LookupDedupe of a NUL tenant: %v", err)
	}
}

// Seed, Ingest row: keys are expired by the DedupeSweeper actor; a backlog larger than its batch drains
// without waiting a tick per batch, and it stops cleanly (goleak, TestMain).
func TestDedupeSweeperActorExpiresKeys(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var recs []*Record
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		recs = append(recs, dedupeRecord(t, "acme", k, time.Millisecond))
	}
	keep := dedupeRecord(t, "acme", "keep", dedupeTTL)
	commitAll(t, db, append(recs, keep)...)
	waitExpired(t, db, "acme", "src", "e")

	system := quietSystem()
	pid := system.Root.Spawn(NewDedupeSweeperProps(func() *DB { return db }, 5*time.Millisecond, 2))
	poll.True(t, 5*time.Second, "the sweeper to delete the expired keys", func() bool {
		total, _ := db.DedupeCounts("acme")
		return total == 1
	})
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	system.Shutdown()
	if _, ok, _ := db.LookupDedupe("acme", "src", "keep", time.Now()); !ok {
		t.Fatal("the sweeper deleted a live key")
	}
	if s := shapeOf(t, db); s.keys != 1 || s.expiries != 1 {
		t.Fatalf("after the sweeper: %+v", s)
	}
}

// A nil store (closed for a restart) is skipped, not a crash.
func TestDedupeSweeperSkipsAClosedStore(t *testing.T) {
	system := quietSystem()
	calls := make(chan struct{}, 64)
	pid := system.Root.Spawn(NewDedupeSweeperProps(func() *DB {
		select {
		case calls <- struct{}{}:
		default:
		}
		return nil
	}, time.Millisecond, 10))
	for range 3 {
		select {
		case <-calls:
		case <-time.After(5 * time.Second):
			t.Fatal("the sweeper never ticked")
		}
	}
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	system.Shutdown()
}

func TestDedupeKeyCodecRoundTripsAndSorts(t *testing.T) {
	s := DedupeScope{Tenant: "acme", Source: "stripe", Key: "evt_\x00\xff"}
	k := AppendDedupeKey([]byte("x"), s)[1:]
	if got, err := ParseDedupeKey(k); err != nil || got != s {
		t.Fatalf("ParseDedupeKey = %+v, %v", got, err)
	}
	e := AppendDedupeExpiryKey(nil, 1234, s)
	if at, got, err := ParseDedupeExpiryKey(e); err != nil || at != 1234 || got != s {
		t.Fatalf("ParseDedupeExpiryKey = %d, %+v, %v", at, got, err)
	}
	id := [16]byte{1, 2, 3}
	if at, got, err := ParseDedupeValue(AppendDedupeValue(nil, 99, id)); err != nil || at != 99 || got != id {
		t.Fatalf("ParseDedupeValue = %d, %x, %v", at, got, err)
	}
	// Expiry keys sort by time first, whatever the scope, so the sweeper reads only the due ones.
	if bytes.Compare(AppendDedupeExpiryKey(nil, 1, DedupeScope{Tenant: "zzz"}), AppendDedupeExpiryKey(nil, 2, s)) >= 0 {
		t.Fatal("expiry keys do not sort by time")
	}
	// A tenant is a prefix of another's keys only up to the NUL: "a" and "ab" never share a scope.
	if bytes.HasPrefix(AppendDedupeKey(nil, DedupeScope{Tenant: "ab"}), AppendDedupeKey(nil, DedupeScope{Tenant: "a"})) {
		t.Fatal("tenant a's key is a prefix of tenant ab's")
	}
	for _, b := range [][]byte{nil, {IndexDedupe}, {IndexDedupe, 'a'}, {IndexDedupe, 'a', 0, 0}, {IndexDedupe, 0, 0, 2, 's'},
		{IndexDue, 'a', 0, 0, 0}} {
		if _, err := ParseDedupeKey(b); !errors.Is(err, ErrBadKey) {
			t.Fatalf("ParseDedupeKey(%x): %v, want ErrBadKey", b, err)
		}
	}
	if _, _, err := ParseDedupeExpiryKey(AppendDedupeExpiryKey(nil, -1, s)); !errors.Is(err, ErrBadKey) {
		t.Fatalf("negative expiry: %v", err)
	}
	if _, _, err := ParseDedupeValue(make([]byte, DedupeValueLen-1)); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("short value: %v", err)
	}
}

func FuzzDedupeKeyCodec(f *testing.F) {
	s := DedupeScope{Tenant: "acme", Source: "stripe", Key: "evt_1"}
	f.Add(AppendDedupeKey(nil, s), "acme", "stripe", "evt_1", int64(5))
	f.Add(AppendDedupeExpiryKey(nil, 7, s), "", "", "", int64(0))
	f.Add(AppendDedupeValue(nil, 7, [16]byte{9}), "t\x00", "s", "k", int64(-1))
	f.Fuzz(func(t *testing.T, b []byte, tenant, source, key string, at int64) {
		// Every parser either refuses the bytes or returns what encodes back to exactly them.
		if sc, err := ParseDedupeKey(b); err == nil && !bytes.Equal(AppendDedupeKey(nil, sc), b) {
			t.Fatalf("dedupe key %x re-encodes as %x", b, AppendDedupeKey(nil, sc))
		}
		if exp, sc, err := ParseDedupeExpiryKey(b); err == nil && !bytes.Equal(AppendDedupeExpiryKey(nil, exp, sc), b) {
			t.Fatalf("expiry key %x re-encodes differently", b)
		}
		if exp, id, err := ParseDedupeValue(b); err == nil && !bytes.Equal(AppendDedupeValue(nil, exp, id), b) {
			t.Fatalf("dedupe value %x re-encodes differently", b)
		}
		// Every scope CommitHooks accepts decodes back to itself.
		sc := DedupeScope{Tenant: tenant, Source: source, Key: key}
		if sc.check() != nil {
			return
		}
		if got, err := ParseDedupeKey(AppendDedupeKey(nil, sc)); err != nil || got != sc {
			t.Fatalf("scope %+v decodes as %+v, %v", sc, got, err)
		}
		if at < 0 {
			at = -(at + 1)
		}
		if gotAt, got, err := ParseDedupeExpiryKey(AppendDedupeExpiryKey(nil, at, sc)); err != nil || got != sc || gotAt != at {
			t.Fatalf("expiry of %+v at %d decodes as %+v at %d, %v", sc, at, got, gotAt, err)
		}
	})
}

// quietSystem is an actor system that logs nothing; a message sent to a stopped actor is a dead letter, whose
// throttle timer lives one interval, kept short so goleak sees it end.
func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
}

// Inventory K.4 applied to the dedupe counters: a count that cannot be read refuses the open instead of
// starting from zero (which would let the index pass its quota).
func TestCorruptDedupeCountRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	commitAll(t, db, dedupeRecord(t, "acme", "k", dedupeTTL))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rawEdit(t, dir, func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
		return rdb.PutCF(wo, cfs[cfDefault], appendDedupeCountKey(nil, "acme"), []byte{1, 2, 3})
	})
	requireOpenRefused(t, dir)
}

// A damaged dedupe key refuses only the hooks that use it (503; the provider retries), never its whole group,
// and the sweeper deletes it when its expiry comes due, so the key works again.
func TestDamagedDedupeKeyRefusesOnlyItsHooksUntilSwept(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	commitAll(t, db, dedupeRecord(t, "acme", "k", time.Minute))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	scope := DedupeScope{Tenant: "acme", Source: "src", Key: "k"}
	rawEdit(t, dir, func(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, cfs []*grocksdb.ColumnFamilyHandle) error {
		return rdb.PutCF(wo, cfs[cfIndex], AppendDedupeKey(nil, scope), []byte{1, 2, 3})
	})
	db = openTest(t, dir, nil)
	hit, plain := dedupeRecord(t, "acme", "k", dedupeTTL), makeRecord(t, "acme", 8, SinkBinding{Type: "http"})
	commitAll(t, db, hit, plain)
	requireOutcome(t, hit, OutcomeRefused)
	if !errors.Is(hit.Outcome.Err, ErrCorruptValue) {
		t.Fatalf("refused with %v, want ErrCorruptValue", hit.Outcome.Err)
	}
	requireOutcome(t, plain, OutcomeCommitted)
	if _, _, err := db.LookupDedupe("acme", "src", "k", time.Now()); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("LookupDedupe of a damaged key: %v", err)
	}
	if n, err := db.SweepDedupe(time.Now().Add(2*time.Minute), 10); err != nil || n != 1 {
		t.Fatalf("sweep deleted %d (%v), want the damaged key", n, err)
	}
	requireCounts(t, db, "acme", 0, 0)
	again := dedupeRecord(t, "acme", "k", dedupeTTL)
	commitAll(t, db, again)
	requireOutcome(t, again, OutcomeCommitted)
}

// dedupe.max_entries_per_source: one source cannot fill its tenant's (or the node's) dedupe share; another
// source of the same tenant still commits new keys, and the count survives a restart and follows the sweeper.
func TestDedupeSourceQuotaRefusesOneSourceOnly(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, DedupeMaxEntries: 100, DedupeMaxEntriesPerTenant: 100, DedupeMaxEntriesPerSource: 2}
	db := openWith(t, opts)
	a1, a2 := dedupeRecord(t, "acme", "k1", time.Minute), dedupeRecord(t, "acme", "k2", dedupeTTL)
	commitAll(t, db, a1, a2)
	a3 := dedupeRecord(t, "acme", "k3", dedupeTTL)
	b1 := dedupeRecord(t, "acme", "k3", dedupeTTL)
	b1.Source = "other"
	commitAll(t, db, a3, b1)
	requireOutcome(t, a3, OutcomeRefused)
	var qe *DedupeQuotaError
	if !errors.Is(a3.Outcome.Err, ErrDedupeQuota) || !errors.As(a3.Outcome.Err, &qe) || qe.Scope != DedupeScopeSource {
		t.Fatalf("refused with %v, want the source's dedupe quota", a3.Outcome.Err)
	}
	requireOutcome(t, b1, OutcomeCommitted)
	if n := db.DedupeSourceCount("src"); n != 2 {
		t.Fatalf("source count %d, want 2", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openWith(t, opts)
	if n, m := db.DedupeSourceCount("src"), db.DedupeSourceCount("other"); n != 2 || m != 1 {
		t.Fatalf("after restart: source counts %d, %d; want 2, 1", n, m)
	}
	a3 = dedupeRecord(t, "acme", "k3", dedupeTTL)
	commitAll(t, db, a3)
	requireOutcome(t, a3, OutcomeRefused)
	if n, err := db.SweepDedupe(time.Now().Add(2*time.Minute), 100); err != nil || n != 1 {
		t.Fatalf("sweep deleted %d (%v), want 1", n, err)
	}
	if n := db.DedupeSourceCount("src"); n != 1 {
		t.Fatalf("source count after the sweep %d, want 1", n)
	}
	a3 = dedupeRecord(t, "acme", "k3", dedupeTTL)
	commitAll(t, db, a3)
	requireOutcome(t, a3, OutcomeCommitted)
}

// A store whose per-source counts are missing (written before they existed) gets them rebuilt at open.
func TestDedupeSourceCountsAreRebuiltWhenTheyDoNotAddUp(t *testing.T) {
	dir := t.TempDir()
	db := openWith(t, Options{Dir: dir})
	commitAll(t, db, dedupeRecord(t, "acme", "k1", dedupeTTL), dedupeRecord(t, "globex", "k1", dedupeTTL))
	// Drop the per-source counts, as a store of the previous format would have none.
	if err := db.rdb.DeleteCF(db.wo, db.cfs[cfDefault], appendDedupeSourceCountKey(nil, "src")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openWith(t, Options{Dir: dir, DedupeMaxEntriesPerSource: 2})
	if n := db.DedupeSourceCount("src"); n != 2 {
		t.Fatalf("rebuilt source count %d, want 2", n)
	}
	r := dedupeRecord(t, "initech", "k1", dedupeTTL)
	commitAll(t, db, r)
	requireOutcome(t, r, OutcomeRefused)
}
