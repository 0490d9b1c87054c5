package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/fixture/s3fake"
)

// blobStores are the stores every compaction test runs on.
func blobStores(*testing.T) map[string]func(t *testing.T) blob.Store {
	return map[string]func(t *testing.T) blob.Store{
		"localfs": func(t *testing.T) blob.Store {
			l, err := blob.NewLocalFS(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"s3": func(t *testing.T) blob.Store {
			srv := s3fake.Start(t)
			s, err := blob.NewS3(context.Background(), srv.S3())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

func eachStore(t *testing.T, fn func(t *testing.T, bs blob.Store)) {
	for name, open := range blobStores(t) {
		t.Run(name, func(t *testing.T) { fn(t, open(t)) })
	}
}

// Seed: "Byte-exact raw body through verify, store, archive and every sink". Every hook compacted comes back
// through Fetch with the same id, received_at, headers and body bytes; hooks nothing else holds leave the store.
func TestCompactAndFetchByteExact(t *testing.T) {
	eachStore(t, func(t *testing.T, bs blob.Store) {
		db := openStore(t, t.TempDir())
		var recs []*store.Record
		for i := range 20 {
			recs = append(recs, hookAt(now(), body(i, i*97)))
		}
		recs = append(recs, hookAt(now(), []byte("\x00\xff\r\n{\"a\":1}\x00")))
		commit(t, db, recs...)
		c := newTestCompactor(t, func() *store.DB { return db }, bs, nil)
		res, err := c.Compact(context.Background())
		if err != nil || res.Segment == nil || res.More {
			t.Fatalf("Compact = %+v, %v", res, err)
		}
		if res.Segment.Records != len(recs) || res.Segment.Reclaimed != len(recs) {
			t.Fatalf("segment of %d records reclaiming %d, want %d", res.Segment.Records, res.Segment.Reclaimed, len(recs))
		}
		for _, r := range recs {
			want, _ := store.DecodeHook(r.Value)
			got, err := Fetch(context.Background(), db, bs, r.ID)
			if err != nil {
				t.Fatalf("Fetch(%x): %v", r.ID, err)
			}
			if !bytes.Equal(got.Body, want.Body) || got.ID != want.ID || got.ReceivedAt != want.ReceivedAt ||
				len(got.Headers) != 1 || got.Headers[0] != want.Headers[0] {
				t.Fatalf("Fetch(%x) = %+v, want %+v", r.ID, got, want)
			}
		}
		if n, _ := db.CountIndex(store.IndexArchive); n != 0 || db.Counts().ArchivePending != 0 {
			t.Fatalf("obligations left: %d (counter %d)", n, db.Counts().ArchivePending)
		}
		ids, _ := db.HookIDs()
		if len(ids) != 0 {
			t.Fatalf("%d archived hooks without deliveries kept in the store", len(ids))
		}
		if _, err := Fetch(context.Background(), db, bs, [16]byte{9}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Fetch(never archived) = %v, want ErrNotFound", err)
		}
	})
}

// Seed, Compactor row: "Never writes one object per hook ... one immutable segment plus one index object".
func TestOneSegmentAndIndexPerTick(t *testing.T) {
	eachStore(t, func(t *testing.T, bs blob.Store) {
		db := openStore(t, t.TempDir())
		for i := range 50 {
			commit(t, db, hookAt(now(), body(i, 200)))
		}
		c := newTestCompactor(t, func() *store.DB { return db }, bs, nil)
		if _, err := c.Compact(context.Background()); err != nil {
			t.Fatal(err)
		}
		segs, idxs, mans := keys(t, bs, ".seg"), keys(t, bs, ".idx"), keys(t, bs, "_manifest.json")
		if len(segs) != 1 || len(idxs) != 1 || len(mans) != 1 {
			t.Fatalf("after one tick: %d segments, %d indexes, %d manifests; want 1 each", len(segs), len(idxs), len(mans))
		}
		seg, idx := SegmentKeys("node-a", Day(now()), 1, 50)
		if segs[0] != seg || idxs[0] != idx {
			t.Fatalf("keys %s %s, want %s %s", segs[0], idxs[0], seg, idx)
		}
		// Nothing left: the next tick writes nothing.
		if res, err := c.Compact(context.Background()); err != nil || res.Segment != nil {
			t.Fatalf("idle tick = %+v, %v", res, err)
		}
		m := readManifest(t, bs, ManifestKey("node-a", Day(now())))
		if len(m.Segments) != 1 || m.Segments[0].Key != seg || m.Segments[0].Count != 50 {
			t.Fatalf("manifest = %+v", m)
		}
	})
}

func readManifest(t *testing.T, bs blob.Store, key string) Manifest {
	t.Helper()
	b, err := readAll(context.Background(), bs, key)
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Inventory B.3: storage.roll_bytes is the segment size cap.
func TestRollBytesRespected(t *testing.T) {
	eachStore(t, func(t *testing.T, bs blob.Store) {
		db := openStore(t, t.TempDir())
		var recs []*store.Record
		for i := range 300 {
			recs = append(recs, hookAt(now(), body(i, 100+i%400)))
		}
		commit(t, db, recs...)
		const roll = 16 << 10
		c := newTestCompactor(t, func() *store.DB { return db }, bs, func(o *CompactorOptions) { o.RollBytes = roll })
		n := compactAll(t, c)
		if n < 4 {
			t.Fatalf("%d segments for ~75 KiB at roll_bytes 16 KiB", n)
		}
		err := bs.List(context.Background(), "archive/", func(o blob.Object) error {
			if o.Size > roll && bytes.HasSuffix([]byte(o.Key), []byte(".seg")) {
				t.Errorf("%s is %d bytes, over roll_bytes %d", o.Key, o.Size, roll)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(keys(t, bs, ".seg")); got != n {
			t.Fatalf("%d segment objects for %d compactions", got, n)
		}
		for _, r := range recs {
			if _, err := Fetch(context.Background(), db, bs, r.ID); err != nil {
				t.Fatal(err)
			}
		}
		m := readManifest(t, bs, ManifestKey("node-a", Day(now())))
		if len(m.Segments) != n {
			t.Fatalf("manifest lists %d segments, %d written", len(m.Segments), n)
		}
	})
}

// storage.roll_ms: obligations that do not fill a segment wait until the oldest is that old.
func TestRollAgeWaitsForMore(t *testing.T) {
	db := openStore(t, t.TempDir())
	bs := newLocal(t)
	at := now()
	commit(t, db, hookAt(at, body(1, 10)))
	clock := time.UnixMilli(at)
	c := newTestCompactor(t, func() *store.DB { return db }, bs, func(o *CompactorOptions) {
		o.RollAge = 30 * time.Second
		o.Now = func() time.Time { return clock }
	})
	if res, err := c.Compact(context.Background()); err != nil || res.Segment != nil {
		t.Fatalf("young obligations compacted: %+v, %v", res, err)
	}
	clock = clock.Add(30 * time.Second)
	if res, err := c.Compact(context.Background()); err != nil || res.Segment == nil {
		t.Fatalf("obligations roll_ms old not compacted: %+v, %v", res, err)
	}
}

// Obligations waiting across ticks are measured once each (the measure is kept while they wait): the ticks
// before they fill a segment write nothing, the one where the latest commit fills it writes a segment from the
// oldest, and the obligations left after it wait again under a fresh measure.
func TestWaitingObligationsFillASegmentAcrossTicks(t *testing.T) {
	db := openStore(t, t.TempDir())
	bs := newLocal(t)
	clock := time.UnixMilli(now())
	c := newTestCompactor(t, func() *store.DB { return db }, bs, func(o *CompactorOptions) {
		o.RollBytes, o.RollAge = 4096, time.Hour
		o.Now = func() time.Time { return clock }
	})
	// 1,000-byte bodies: the fifth fills 4 KiB less the segment's overhead by the charged sizes alone.
	for i := range 4 {
		commit(t, db, hookAt(clock.UnixMilli(), body(i, 1000)))
		if res, err := c.Compact(context.Background()); err != nil || res.Segment != nil {
			t.Fatalf("tick %d with %d young obligations compacted: %+v, %v", i+1, i+1, res, err)
		}
	}
	commit(t, db, hookAt(clock.UnixMilli(), body(4, 1000)))
	res, err := c.Compact(context.Background())
	if err != nil || res.Segment == nil || res.Segment.Records != 3 || !res.More {
		t.Fatalf("the tick after the fifth obligation: %+v, %v; want a segment of the first 3 and more", res, err)
	}
	if res, err := c.Compact(context.Background()); err != nil || res.Segment != nil {
		t.Fatalf("the two left, young and short of a segment, compacted: %+v, %v", res, err)
	}
	clock = clock.Add(time.Hour)
	if res, err := c.Compact(context.Background()); err != nil || res.Segment == nil || res.Segment.Records != 2 || res.More {
		t.Fatalf("the two left, roll_ms old: %+v, %v", res, err)
	}
	if n := db.Counts().ArchivePending; n != 0 {
		t.Fatalf("%d obligations left", n)
	}
}

// Seed, Compactor row: "A failed blob write ends the tick and the same hooks are retried next tick". Every
// stage's failure leaves the obligations and the hooks; the retry writes the same keys and loses nothing.
func TestFailingBlobStoreRetriedNothingLost(t *testing.T) {
	for fails, stage := range []string{StagePutSegment, StagePutIndex, StageManifest} {
		t.Run(stage, func(t *testing.T) {
			db := openStore(t, t.TempDir())
			mem := newLocal(t)
			var recs []*store.Record
			for i := range 30 {
				recs = append(recs, hookAt(now(), body(i, 300)))
			}
			commit(t, db, recs...)
			failAt := fails // the puts go segment, index, manifest
			c := newTestCompactor(t, func() *store.DB { return db }, &stageFail{Store: mem, failAt: failAt}, nil)
			_, err := c.Compact(context.Background())
			var se *StageError
			if !errors.As(err, &se) || se.Stage != stage || !errors.Is(err, errInjected) {
				t.Fatalf("Compact with put %d failing = %v, want stage %s", failAt, err, stage)
			}
			if db.Counts().ArchivePending != int64(len(recs)) {
				t.Fatalf("archive pending %d after a failed tick, want %d", db.Counts().ArchivePending, len(recs))
			}
			if ids, _ := db.HookIDs(); len(ids) != len(recs) {
				t.Fatalf("%d hooks left after a failed tick, want %d", len(ids), len(recs))
			}
			if _, err := Fetch(context.Background(), db, mem, recs[0].ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("hook fetchable before its segment was catalogued: %v", err)
			}
			// A new hook arrives before the retry: the retry still writes the same hooks under the same keys.
			commit(t, db, hookAt(now(), body(99, 10)))
			if _, err := c.Compact(context.Background()); err != nil {
				t.Fatalf("retry: %v", err)
			}
			compactAll(t, c)
			for _, r := range recs {
				if _, err := Fetch(context.Background(), db, mem, r.ID); err != nil {
					t.Fatalf("after the retry: %v", err)
				}
			}
			want, _ := SegmentKeys("node-a", Day(now()), 1, uint64(len(recs)))
			if segs := keys(t, mem, ".seg"); len(segs) != 2 || segs[0] != want {
				t.Fatalf("segments after retry = %v, want %s and the new hook's", segs, want)
			}
			if db.Counts().ArchivePending != 0 {
				t.Fatalf("archive pending %d after the retry", db.Counts().ArchivePending)
			}
		})
	}
}

// stageFail fails the failAt-th Put (0-based) of one Compact and lets every other through.
type stageFail struct {
	blob.Store
	failAt int
	puts   int
}

func (s *stageFail) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	s.puts++
	if s.puts-1 == s.failAt {
		return errInjected
	}
	return s.Store.Put(ctx, key, r, size)
}

// The catalogue lives in the store: a reopened store still finds every archived hook.
func TestCatalogueSurvivesRestart(t *testing.T) {
	eachStore(t, func(t *testing.T, bs blob.Store) {
		dir := t.TempDir()
		db, err := store.Open(store.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		r := hookAt(now(), body(3, 1000))
		commit(t, db, r)
		c := newTestCompactor(t, func() *store.DB { return db }, bs, nil)
		compactAll(t, c)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = openStore(t, dir)
		got, err := Fetch(context.Background(), db, bs, r.ID)
		want, _ := store.DecodeHook(r.Value)
		if err != nil || !bytes.Equal(got.Body, want.Body) {
			t.Fatalf("Fetch after reopen = %v", err)
		}
	})
}

// Seed: "Hooks dispatch hasn't consumed yet are not touched, so at-least-once delivery survives compaction".
func TestCompactionNeverRemovesAHookWithPendingDeliveries(t *testing.T) {
	db := openStore(t, t.TempDir())
	bs := newLocal(t)
	pending := hookAt(now(), body(1, 50), store.SinkBinding{Index: 0, Type: "http"})
	done := hookAt(now(), body(2, 50))
	commit(t, db, pending, done)
	compactAll(t, newTestCompactor(t, func() *store.DB { return db }, bs, nil))
	ids, err := db.HookIDs()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ids[pending.ID]; !ok {
		t.Fatal("compaction removed a hook whose delivery is pending")
	}
	if _, ok := ids[done.ID]; ok {
		t.Fatal("compaction kept a hook nothing holds any more")
	}
	var rows int
	_ = db.ForEachDelivery(func(uint64, store.DeliveryRow) error { rows++; return nil })
	if rows != 1 {
		t.Fatalf("%d delivery rows after compaction, want 1", rows)
	}
	for _, r := range []*store.Record{pending, done} {
		if _, err := Fetch(context.Background(), db, bs, r.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// A segment object removed behind the catalogue's back is an error, not "not archived" (seed: "Storage.fetch/2
// answers :error").
func TestFetchMissingSegmentIsAnError(t *testing.T) {
	db := openStore(t, t.TempDir())
	bs := newLocal(t)
	r := hookAt(now(), body(1, 50))
	commit(t, db, r)
	compactAll(t, newTestCompactor(t, func() *store.DB { return db }, bs, nil))
	for _, k := range keys(t, bs, ".seg") {
		_ = bs.Delete(context.Background(), k)
	}
	_, err := Fetch(context.Background(), db, bs, r.ID)
	if err == nil || errors.Is(err, ErrNotFound) || !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Fetch with the segment gone = %v, want a blob not-found error that is not ErrNotFound", err)
	}
}

// archive.retention_days: "deletes a segment object, its index and its catalogue row through the blob store once
// the newest hook in it is that old"; nothing younger goes, and the manifest follows.
func TestRetentionDeletesWhatItShouldAndNothingElse(t *testing.T) {
	eachStore(t, func(t *testing.T, bs blob.Store) {
		db := openStore(t, t.TempDir())
		clock := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		day := 24 * time.Hour
		old1 := hookAt(clock.Add(-10*day).UnixMilli(), body(1, 10))
		old2 := hookAt(clock.Add(-10*day).Add(time.Hour).UnixMilli(), body(2, 10))
		edge := hookAt(clock.Add(-7*day).Add(time.Minute).UnixMilli(), body(3, 10))
		fresh := hookAt(clock.Add(-time.Hour).UnixMilli(), body(4, 10))
		c := newTestCompactor(t, func() *store.DB { return db }, bs, func(o *CompactorOptions) {
			o.Retention = 7 * day
			o.Now = func() time.Time { return clock }
		})
		// One segment each, two of them on the same old day.
		for _, r := range []*store.Record{old1, old2, edge, fresh} {
			commit(t, db, r)
			compactAll(t, c)
		}
		oldDay := Day(old1.ReceivedAt)
		if m := readManifest(t, bs, ManifestKey("node-a", oldDay)); len(m.Segments) != 2 {
			t.Fatalf("old day's manifest lists %d segments, want 2", len(m.Segments))
		}
		n, err := c.Retain(context.Background())
		if err != nil || n != 2 {
			t.Fatalf("Retain = %d, %v; want the 2 old segments", n, err)
		}
		for _, r := range []*store.Record{old1, old2} {
			if _, err := Fetch(context.Background(), db, bs, r.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("expired hook still fetchable: %v", err)
			}
		}
		for _, r := range []*store.Record{edge, fresh} {
			if _, err := Fetch(context.Background(), db, bs, r.ID); err != nil {
				t.Fatalf("hook within retention lost: %v", err)
			}
		}
		if segs, idxs := keys(t, bs, ".seg"), keys(t, bs, ".idx"); len(segs) != 2 || len(idxs) != 2 {
			t.Fatalf("after retention %v %v; want the 2 young segments and indexes", segs, idxs)
		}
		if _, err := bs.Get(context.Background(), ManifestKey("node-a", oldDay)); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("the emptied day's manifest is still there: %v", err)
		}
		if m := readManifest(t, bs, ManifestKey("node-a", Day(fresh.ReceivedAt))); len(m.Segments) != 1 {
			t.Fatalf("fresh day's manifest = %+v", m)
		}
		// Off (0) deletes nothing.
		c.o.Retention = 0
		if n, err := c.Retain(context.Background()); n != 0 || err != nil {
			t.Fatalf("Retain with retention off = %d, %v", n, err)
		}
		// storage.catalogue_retention_days hides without deleting.
		if _, err := FetchVisible(context.Background(), db, bs, edge.ID, clock.Add(-2*day)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("FetchVisible past the catalogue retention = %v", err)
		}
	})
}

func TestReplayWindow(t *testing.T) {
	db := openStore(t, t.TempDir())
	bs := newLocal(t)
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var recs []*store.Record
	for i := range 10 {
		recs = append(recs, hookAt(base+int64(i)*1000, body(i, 20)))
	}
	commit(t, db, recs...)
	compactAll(t, newTestCompactor(t, func() *store.DB { return db }, bs, func(o *CompactorOptions) { o.RollBytes = 300 }))
	var got []int64
	st, err := Replay(context.Background(), db, bs, base+3000, base+6000, func(_ uint64, h *store.Hook) error {
		got = append(got, h.ReceivedAt-base)
		return nil
	})
	if err != nil || len(got) != 4 || got[0] != 3000 || got[3] != 6000 || st.Skipped != 0 {
		t.Fatalf("Replay = %v, %+v, %v", got, st, err)
	}
	// A segment whose object is gone is skipped, not fatal.
	for _, k := range keys(t, bs, ".seg")[:1] {
		_ = bs.Delete(context.Background(), k)
	}
	st, err = Replay(context.Background(), db, bs, 0, 0, func(uint64, *store.Hook) error { return nil })
	if err != nil || st.Skipped != 1 || st.Hooks == 0 {
		t.Fatalf("Replay with a segment gone = %+v, %v", st, err)
	}
}

// A compactor that dies after its PUTs and before its catalogue batch leaves the obligations; the next
// incarnation (nothing carried over) writes the same hooks under the same keys, so no second copy appears.
func TestNewIncarnationRewritesTheSameKeys(t *testing.T) {
	db := openStore(t, t.TempDir())
	bs := newLocal(t)
	var recs []*store.Record
	for i := range 25 {
		recs = append(recs, hookAt(now(), body(i, 64)))
	}
	commit(t, db, recs...)
	dying := newTestCompactor(t, func() *store.DB { return db }, &stageFail{Store: bs, failAt: 2}, nil)
	if _, err := dying.Compact(context.Background()); err == nil {
		t.Fatal("the manifest put did not fail")
	}
	before := keys(t, bs, ".seg")
	compactAll(t, newTestCompactor(t, func() *store.DB { return db }, bs, nil))
	after := keys(t, bs, ".seg")
	if len(before) != 1 || len(after) != 1 || before[0] != after[0] {
		t.Fatalf("segments before the restart %v, after %v: want the same one", before, after)
	}
	for _, r := range recs {
		if _, err := Fetch(context.Background(), db, bs, r.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// A paced compaction pauses inside itself (between the hooks it reads, the bytes it writes and the store
// batches it catalogues with) and writes the same segment: every hook comes back byte-exact.
func TestPacedCompactionPausesAndLosesNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, bs blob.Store) {
		db := openStore(t, t.TempDir())
		var recs []*store.Record
		for i := range 1500 {
			recs = append(recs, hookAt(now(), body(i, 1024)))
		}
		commit(t, db, recs...)
		c := newTestCompactor(t, func() *store.DB { return db }, bs, func(o *CompactorOptions) { o.RollBytes = 8 << 20 })
		asked := 0
		pace := NewPacer(context.Background(), 50, func() bool { asked++; return true })
		res, err := c.CompactPaced(context.Background(), pace)
		if err != nil || res.Segment == nil || res.More || res.Segment.Records != len(recs) {
			t.Fatalf("CompactPaced = %+v, %v; want one segment of %d", res, err, len(recs))
		}
		// 1.5 MiB read, encoded, written and catalogued take more than one 2 ms slice anywhere.
		if asked == 0 || pace.Slept() == 0 {
			t.Fatalf("pacer asked %d times, paused %v: the compaction ran in one stretch", asked, pace.Slept())
		}
		for _, r := range recs {
			want, _ := store.DecodeHook(r.Value)
			got, err := Fetch(context.Background(), db, bs, r.ID)
			if err != nil || !bytes.Equal(got.Body, want.Body) || got.ID != want.ID {
				t.Fatalf("Fetch(%x) = %v; body equal %v", r.ID, err, bytes.Equal(got.Body, want.Body))
			}
		}
		if db.Counts().ArchivePending != 0 {
			t.Fatalf("obligations left: %d", db.Counts().ArchivePending)
		}
	})
}
