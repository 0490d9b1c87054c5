package store

import (
	"errors"
	"testing"
	"time"
)

// commitArchived commits recs with an archive obligation each and returns their seqs.
func commitArchived(t *testing.T, db *DB, recs ...*Record) []uint64 {
	t.Helper()
	for _, r := range recs {
		r.Archive = true
	}
	if _, err := db.CommitHooks(recs); err != nil {
		t.Fatalf("CommitHooks: %v", err)
	}
	seqs := make([]uint64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Outcome.Seq
	}
	return seqs
}

// catalogue catalogues obligations as one segment the way the compactor does.
func catalogue(t *testing.T, db *DB, obs []Obligation, at int64) SegmentEntry {
	t.Helper()
	e := SegmentEntry{FirstSeq: obs[0].Seq, LastSeq: obs[len(obs)-1].Seq, SegmentKey: "seg", IndexKey: "idx",
		Count: uint32(len(obs)), MinReceivedAt: at, MaxReceivedAt: at, CreatedAt: at}
	hooks := make([]ArchivedHook, len(obs))
	for i, o := range obs {
		h, err := DecodeHook(o.Value)
		if err != nil {
			t.Fatal(err)
		}
		hooks[i] = ArchivedHook{Seq: o.Seq, ID: h.ID, Offset: 8 + 40*int64(i), Length: 40}
	}
	if _, err := db.CatalogueSegment(&e, hooks, nil, nil); err != nil {
		t.Fatalf("CatalogueSegment: %v", err)
	}
	return e
}

// Inventory E.3: "a hook is deleted once its last obligation clears (every delivery row, + archive obligation
// if present); dead rows keep the hook". Cataloguing clears the archive obligation: a hook with no delivery row
// goes, one with a pending delivery stays until dispatch completes it.
func TestCatalogueNeverRemovesAHookWithPendingDeliveries(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	pending := makeRecord(t, "t1", 32, SinkBinding{Index: 0, Type: "http"})
	archiveOnly := makeRecord(t, "t1", 32)
	seqs := commitArchived(t, db, pending, archiveOnly)
	if got := db.Counts().ArchivePending; got != 2 {
		t.Fatalf("archive pending = %d, want 2", got)
	}

	obs, _, err := db.Obligations(0, 1<<20, 0, 100, nil)
	if err != nil || len(obs) != 2 {
		t.Fatalf("Obligations = %d, %v; want 2", len(obs), err)
	}
	e := catalogue(t, db, obs, 1)
	if got := db.Counts().ArchivePending; got != 0 {
		t.Fatalf("archive pending after catalogue = %d, want 0", got)
	}
	if _, err := db.GetHook(seqs[0]); err != nil {
		t.Fatalf("hook with a pending delivery was removed: %v", err)
	}
	if _, err := db.GetHook(seqs[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("archived hook without deliveries kept: %v", err)
	}
	for _, r := range []*Record{pending, archiveOnly} {
		got, _, err := db.ArchivedSegment(r.ID)
		if err != nil || got.FirstSeq != e.FirstSeq {
			t.Fatalf("ArchivedSegment = %+v, %v", got, err)
		}
	}
	// A second call for the same segment (a crash after the write, before the compactor knew) changes nothing.
	if _, err := db.CatalogueSegment(&e, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := db.Counts().ArchivePending; got != 0 {
		t.Fatalf("archive pending after a repeated catalogue = %d", got)
	}

	// The delivery completes: now nothing holds the hook.
	ord, _ := db.TenantOrdinal("t1")
	cs, err := db.ClaimDue(ord, time.Now().Add(time.Hour).UnixMilli(), 10, 0, nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDue = %d, %v", len(cs), err)
	}
	if err := db.Complete(&cs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetHook(seqs[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("hook kept after its last delivery and its archive obligation cleared: %v", err)
	}
}

// A delivery completed before the archive obligation clears keeps the hook for the compactor.
func TestCompleteKeepsAHookTheArchiveStillHolds(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	r := makeRecord(t, "t1", 32, SinkBinding{Index: 0, Type: "http"})
	seq := commitArchived(t, db, r)[0]
	ord, _ := db.TenantOrdinal("t1")
	cs, err := db.ClaimDue(ord, time.Now().Add(time.Hour).UnixMilli(), 10, 0, nil)
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimDue = %d, %v", len(cs), err)
	}
	if err := db.Complete(&cs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetHook(seq); err != nil {
		t.Fatalf("hook removed while its archive obligation holds it: %v", err)
	}
	obs, _, err := db.Obligations(0, 1<<20, 0, 100, nil)
	if err != nil || len(obs) != 1 {
		t.Fatalf("Obligations = %d, %v", len(obs), err)
	}
	catalogue(t, db, obs, 1)
	if _, err := db.GetHook(seq); !errors.Is(err, ErrNotFound) {
		t.Fatalf("hook kept after its last obligation cleared: %v", err)
	}
}

func TestObligationsByteBudget(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var recs []*Record
	for range 10 {
		recs = append(recs, makeRecord(t, "t1", 100))
	}
	seqs := commitArchived(t, db, recs...)
	size := int64(len(recs[0].Value))
	obs, more, err := db.Obligations(0, 3*size+3*8, 8, 100, nil)
	if err != nil || len(obs) != 3 || obs[0].Seq != seqs[0] || !more {
		t.Fatalf("Obligations(3 hooks' bytes) = %d, %v", len(obs), err)
	}
	// At least one, whatever the budget.
	if obs, _, err = db.Obligations(0, 1, 0, 100, nil); err != nil || len(obs) != 1 {
		t.Fatalf("Obligations(1 byte) = %d, %v", len(obs), err)
	}
	if obs, more, err = db.Obligations(seqs[8], 1<<20, 0, 100, nil); err != nil || len(obs) != 1 || obs[0].Seq != seqs[9] || more {
		t.Fatalf("Obligations(after 8) = %+v, %v", obs, err)
	}
	if obs, _, err = db.Obligations(0, 1<<20, 0, 4, nil); err != nil || len(obs) != 4 {
		t.Fatalf("Obligations(max 4) = %d, %v", len(obs), err)
	}
}

// MeasureObligations reads the charged sizes and the oldest hook's received_at, and stops where enough says.
func TestMeasureObligations(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var recs []*Record
	for i := range 10 {
		recs = append(recs, makeRecord(t, "t1", 100+i))
	}
	seqs := commitArchived(t, db, recs...)
	all := func(*ObligationsMeasure) bool { return false }
	m, err := db.MeasureObligations(0, all)
	var charged int64
	for _, r := range recs {
		charged += int64(r.Size)
	}
	if err != nil || m.Count != 10 || m.Charged != charged || m.First != seqs[0] || m.FirstReceivedAt != recs[0].ReceivedAt || m.Stopped {
		t.Fatalf("MeasureObligations(all) = %+v, %v; want 10 obligations, %d bytes, first %d at %d", m, err, charged,
			seqs[0], recs[0].ReceivedAt)
	}
	m, err = db.MeasureObligations(seqs[2], func(m *ObligationsMeasure) bool { return m.Charged >= 200 })
	if err != nil || m.Count != 2 || m.First != seqs[3] || m.FirstReceivedAt != recs[3].ReceivedAt || !m.Stopped {
		t.Fatalf("MeasureObligations(after %d, 200 bytes) = %+v, %v", seqs[2], m, err)
	}
	if m, err = db.MeasureObligations(seqs[9], all); err != nil || m.Count != 0 || m.Stopped {
		t.Fatalf("MeasureObligations(after the last) = %+v, %v", m, err)
	}
}

// MeasureMore goes on from where a measure that did not stop ended: the obligations committed since are added,
// none measured before is counted again, and the first one's head stays the measure's.
func TestMeasureMore(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	first := []*Record{makeRecord(t, "t1", 100), makeRecord(t, "t1", 101), makeRecord(t, "t1", 102)}
	seqs := commitArchived(t, db, first...)
	all := func(*ObligationsMeasure) bool { return false }
	m, err := db.MeasureObligations(0, all)
	if err != nil || m.Count != 3 || m.Last != seqs[2] || m.Stopped {
		t.Fatalf("MeasureObligations = %+v, %v", m, err)
	}
	if err := db.MeasureMore(&m, all); err != nil || m.Count != 3 || m.Charged != 303 {
		t.Fatalf("MeasureMore with nothing new = %+v, %v", m, err)
	}
	later := []*Record{makeRecord(t, "t1", 200), makeRecord(t, "t1", 201)}
	more := commitArchived(t, db, later...)
	if err := db.MeasureMore(&m, func(m *ObligationsMeasure) bool { return m.Charged >= 503 }); err != nil ||
		m.Count != 4 || m.Charged != 503 || m.Last != more[0] || !m.Stopped || m.First != seqs[0] ||
		m.FirstReceivedAt != first[0].ReceivedAt || m.FirstBytes != len(first[0].Value) {
		t.Fatalf("MeasureMore after two more = %+v, %v; want 4 obligations, 503 bytes, stopped at %d", m, err, more[0])
	}
	if err := db.MeasureMore(&m, all); err != nil || m.Count != 5 || m.Last != more[1] || m.Stopped {
		t.Fatalf("MeasureMore to the end = %+v, %v", m, err)
	}
}

func TestCatalogueSurvivesReopenAndDeleteSegment(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	a, b := makeRecord(t, "t1", 8), makeRecord(t, "t1", 8)
	commitArchived(t, db, a)
	obs, _, _ := db.Obligations(0, 1<<20, 0, 100, nil)
	e1 := catalogue(t, db, obs, 1000)
	commitArchived(t, db, b)
	obs, _, _ = db.Obligations(e1.LastSeq, 1<<20, 0, 100, nil)
	e2 := catalogue(t, db, obs, 5000)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, dir, nil)
	if got, _, err := db.ArchivedSegment(b.ID); err != nil || got != e2 {
		t.Fatalf("after reopen ArchivedSegment = %+v, %v; want %+v", got, err, e2)
	}
	var window []uint64
	if err := db.Segments(4000, 0, func(e SegmentEntry) error { window = append(window, e.FirstSeq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(window) != 1 || window[0] != e2.FirstSeq {
		t.Fatalf("Segments(4000..) = %v, want [%d]", window, e2.FirstSeq)
	}
	if last, err := db.LastArchivedSeq(); err != nil || last != e2.LastSeq {
		t.Fatalf("LastArchivedSeq = %d, %v", last, err)
	}
	if err := db.DeleteSegment(e1.FirstSeq); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.ArchivedSegment(a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted segment's hook still found: %v", err)
	}
	if _, _, err := db.ArchivedSegment(b.ID); err != nil {
		t.Fatalf("the other segment went too: %v", err)
	}
}

func TestOpenReadOnlyBesideTheWriter(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	r := makeRecord(t, "t1", 8)
	commitArchived(t, db, r)
	obs, _, _ := db.Obligations(0, 1<<20, 0, 100, nil)
	e := catalogue(t, db, obs, 1)
	ro, err := OpenReadOnly(dir, db.log)
	if err != nil {
		t.Fatalf("OpenReadOnly beside the open store: %v", err)
	}
	defer ro.Close()
	if got, loc, err := ro.ArchivedSegment(r.ID); err != nil || got != e || loc.Offset != 8 || loc.Length != 40 {
		t.Fatalf("read-only ArchivedSegment = %+v, %v", got, err)
	}
	if _, err := OpenReadOnly(t.TempDir(), db.log); !errors.Is(err, ErrOpenFailed) {
		t.Fatalf("OpenReadOnly(empty dir) = %v, want ErrOpenFailed", err)
	}
}

func FuzzDecodeSegmentEntry(f *testing.F) {
	f.Add(AppendSegmentEntry(nil, &SegmentEntry{FirstSeq: 1, LastSeq: 2, SegmentKey: "a", IndexKey: "b", Count: 2}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeSegmentEntry(b)
		if err != nil {
			return
		}
		again, err := DecodeSegmentEntry(AppendSegmentEntry(nil, &e))
		if err != nil || again != e {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, e)
		}
	})
}

// The clearing batch deletes obligations as one range, runs of reclaimed hooks as ranges and the rest key by
// key; whatever the shape, exactly these go: the obligations of the catalogued hooks, the hooks no delivery row
// holds and their claim markers. An obligation inside the range that the segment does not hold (here: left out
// of the call) stays with its hook, and so does every key just outside the range.
func TestClearingDeletesExactlyTheCataloguedObligations(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var recs []*Record
	for i := range 3*minDeleteRun + 10 {
		if i == minDeleteRun+3 || i == 2*minDeleteRun+1 {
			recs = append(recs, makeRecord(t, "t1", 16, SinkBinding{Index: 0, Type: "http"})) // a pending delivery
		} else {
			recs = append(recs, makeRecord(t, "t1", 16))
		}
	}
	seqs := commitArchived(t, db, recs...)
	for _, i := range []int{5, minDeleteRun + 3, 2 * minDeleteRun} {
		if err := db.PutClaimRef(seqs[i], "ref"); err != nil {
			t.Fatal(err)
		}
	}
	obs, _, err := db.Obligations(0, 1<<30, 0, 1<<20, nil)
	if err != nil || len(obs) != len(recs) {
		t.Fatalf("Obligations = %d, %v", len(obs), err)
	}
	// Two calls: the whole run (range deletions) but for the first and last hooks and one in the middle, which a
	// second call catalogues with one obligation held back (so it clears key by key).
	first, last, skip := 0, len(obs)-1, 2*minDeleteRun+5
	var inner, rest []Obligation
	for i, o := range obs {
		if i == first || i == last || i == skip {
			rest = append(rest, o)
		} else {
			inner = append(inner, o)
		}
	}
	catalogue(t, db, inner, 1)
	catalogue(t, db, rest[:2], 1) // first and the skipped one; the last is held back
	gone := func(i int) bool {
		_, err := db.GetHook(seqs[i])
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		return err != nil
	}
	for i := range recs {
		pendingRow := i == minDeleteRun+3 || i == 2*minDeleteRun+1
		if want := i != last && !pendingRow; gone(i) != want {
			t.Errorf("hook %d (seq %d) gone = %v, want %v", i, seqs[i], !want, want)
		}
	}
	if n, err := db.CountIndex(IndexArchive); err != nil || n != 1 || db.Counts().ArchivePending != 1 {
		t.Fatalf("obligations left %d (counter %d), %v; want the held-back one", n, db.Counts().ArchivePending, err)
	}
	if rest, _, err := db.Obligations(0, 1<<30, 0, 10, nil); err != nil || len(rest) != 1 || rest[0].Seq != seqs[last] {
		t.Fatalf("obligation left = %+v, %v", rest, err)
	}
	for i, want := range map[int]bool{5: false, minDeleteRun + 3: true, 2 * minDeleteRun: false} {
		if _, ok, err := db.ClaimRef(seqs[i]); err != nil || ok != want {
			t.Errorf("claim marker of hook %d kept = %v, %v; want %v", i, ok, err, want)
		}
	}
	if n, err := db.CountIndex(IndexClaim); err != nil || n != 1 {
		t.Fatalf("claim markers left %d, %v", n, err)
	}
}

// The compactor's scans read a segment's worth of hooks no one reads again: from tables on disk they must not
// fill the block cache, which holds what the ingest commits and dispatch look up.
func TestScanObligationsLeavesTheBlockCache(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var recs []*Record
	for range 4000 {
		recs = append(recs, makeRecord(t, "t1", 1024))
	}
	commitArchived(t, db, recs...)
	flushAll(t, db)
	before := db.cache.GetUsage()
	var n int
	var bytes int64
	if _, err := db.ScanObligations(0, 1<<30, 0, 1<<20, func(_ uint64, _ uint32, v []byte) error {
		n++
		bytes += int64(len(v))
		return nil
	}); err != nil || n != len(recs) {
		t.Fatalf("ScanObligations = %d hooks, %v", n, err)
	}
	if grown := db.cache.GetUsage() - before; grown > uint64(bytes)/16 {
		t.Fatalf("scanning %d bytes of hooks grew the block cache by %d bytes", bytes, grown)
	} else {
		t.Logf("scanning %d bytes of hooks grew the block cache by %d bytes", bytes, grown)
	}
}

// segmentOf commits n archived hooks and returns them, their seqs, and a segment entry and frame locations
// for all of them (hook i at offset i), as the compactor would catalogue them.
func segmentOf(t *testing.T, db *DB, n int) ([]*Record, []uint64, SegmentEntry, []ArchivedHook) {
	t.Helper()
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = makeRecord(t, "t1", 16)
	}
	seqs := commitArchived(t, db, recs...)
	obs, _, err := db.Obligations(0, 1<<30, 0, n, nil)
	if err != nil || len(obs) != n {
		t.Fatalf("Obligations = %d, %v; want %d", len(obs), err, n)
	}
	e := SegmentEntry{FirstSeq: obs[0].Seq, LastSeq: obs[n-1].Seq, SegmentKey: "seg", IndexKey: "idx", Count: uint32(n)}
	hooks := make([]ArchivedHook, n)
	for i, o := range obs {
		hooks[i] = ArchivedHook{Seq: o.Seq, ID: recs[i].ID, Offset: int64(i), Length: 1}
	}
	return recs, seqs, e, hooks
}

// A segment of more hooks than one catalogue batch takes is catalogued in several, with the caller's pace
// between them, and every hook of it can be fetched once the call returns.
func TestCatalogueInBatchesWithPace(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	n := 2*catalogueChunk + clearChunk/2
	recs, _, e, hooks := segmentOf(t, db, n)
	paced := 0
	if _, err := db.CatalogueSegment(&e, hooks, nil, func() { paced++ }); err != nil {
		t.Fatal(err)
	}
	// Three batches of 'I' keys, three of clearing: a pace before each.
	if paced != 6 {
		t.Fatalf("paced %d times, want 6", paced)
	}
	for i, r := range recs {
		got, loc, err := db.ArchivedSegment(r.ID)
		if err != nil || got.FirstSeq != e.FirstSeq || loc.Offset != int64(i) {
			t.Fatalf("hook %d: ArchivedSegment = %+v %+v, %v", i, got, loc, err)
		}
	}
	if got := db.Counts().ArchivePending; got != 0 {
		t.Fatalf("archive pending = %d, want 0", got)
	}
}

// A catalogue cut short between its batches (here by the store closing, as a crash would) clears no
// obligation: every hook is still in the store, and still owed to the archive after a reopen.
func TestCatalogueCutShortClearsNothing(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	n := 2*catalogueChunk + 1
	_, seqs, e, hooks := segmentOf(t, db, n)
	paced := 0
	_, err := db.CatalogueSegment(&e, hooks, nil, func() {
		if paced++; paced == 2 { // after the segment row and the first batch of 'I' keys
			if err := db.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("CatalogueSegment after close = %v, want ErrClosed", err)
	}
	db = openTest(t, dir, nil)
	if got := db.Counts().ArchivePending; got != int64(n) {
		t.Fatalf("archive pending after reopen = %d, want %d", got, n)
	}
	for _, s := range seqs {
		if _, err := db.GetHook(s); err != nil {
			t.Fatalf("hook %d gone after a cut-short catalogue: %v", s, err)
		}
	}
}
