package storage

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
)

// TestRecatalogueReadsTheNodesSegmentsOfTheWindow proves what a restore reconciles against (inventory
// E.5: "m:next_seq moved past the highest archived seq"): the highest last seq among this node's segments of
// the days in the window, ignoring other nodes, other days and objects that are not segments.
func TestRecatalogueReadsTheNodesSegmentsOfTheWindow(t *testing.T) {
	ctx := context.Background()
	bs, err := blob.NewLocalFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	day := func(d time.Time) string { return Day(d.UnixMilli()) }
	now := time.Date(2026, 12, 3, 0, 30, 0, 0, time.UTC)
	put := func(key string) {
		if err := bs.Put(ctx, key, bytes.NewReader([]byte("x")), 1); err != nil {
			t.Fatal(err)
		}
	}
	yesterday, today := day(now.Add(-time.Hour)), day(now)
	seg, idx := SegmentKeys("node-a", yesterday, 1, 120)
	put(seg)
	put(idx)
	seg, _ = SegmentKeys("node-a", today, 121, 250)
	put(seg)
	put(ManifestKey("node-a", today))
	seg, _ = SegmentKeys("node-b", today, 1, 9000) // another node
	put(seg)
	seg, _ = SegmentKeys("node-a", day(now.Add(-72*time.Hour)), 1, 7000) // outside the window
	put(seg)

	db := openStore(t, t.TempDir())
	got, err := Recatalogue(ctx, db, bs, "node-a", now.Add(-2*time.Hour).UnixMilli(), now.UnixMilli(), zerolog.Nop())
	if err != nil || got.HighestSeq != 250 || got.Listed != 2 {
		t.Fatalf("Recatalogue = %+v, %v; want highest seq 250 of 2 segments", got, err)
	}
	got, err = Recatalogue(ctx, db, bs, "node-c", now.Add(-2*time.Hour).UnixMilli(), now.UnixMilli(), zerolog.Nop())
	if err != nil || got.HighestSeq != 0 {
		t.Fatalf("Recatalogue of a node with no segment = %+v, %v", got, err)
	}
}

// TestRecatalogueMakesSegmentsWrittenAfterTheBackupFetchable proves the restore's re-catalogue (inventory E.5:
// "uncatalogued segments catalogued from their index"; seed: hooks acked after the last backup are lost with
// the box, "their archive copies, if the compactor wrote any, are catalogued again"). A store copied (the
// backup) while some hooks were archived and others still held obligations goes on archiving; the copy is
// re-catalogued from the blob store: every hook the lost store archived is fetchable by id from it, byte for
// byte, the copy's obligations of hooks already in a segment are cleared, and its compactor then writes no
// second segment over theirs.
func TestRecatalogueMakesSegmentsWrittenAfterTheBackupFetchable(t *testing.T) {
	ctx := context.Background()
	bs := newLocal(t)
	db := openStore(t, t.TempDir())
	c := newTestCompactor(t, func() *store.DB { return db }, bs, func(o *CompactorOptions) { o.RollBytes = 4 << 10 })
	bodies := map[[16]byte][]byte{}
	post := func(from, to int) {
		for i := from; i < to; i++ {
			r := hookAt(now(), body(i, 700))
			commit(t, db, r)
			bodies[r.ID] = body(i, 700)
		}
	}
	post(0, 10)
	compactAll(t, c) // archived before the backup: in its catalogue
	post(10, 20)     // obligations still pending when the backup is taken
	backupDir := filepath.Join(t.TempDir(), "copy")
	if err := db.Checkpoint(backupDir); err != nil {
		t.Fatal(err)
	}
	post(20, 40) // acked after the backup: lost with the box but for the archive
	compactAll(t, c)

	restored := openStore(t, backupDir)
	before := len(keys(t, bs, ".seg"))
	st, err := Recatalogue(ctx, restored, bs, "node-a", now()-86_400_000, now(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recatalogue: %+v", st)
	if st.Catalogued == 0 || st.Hooks != 30 || st.Unreadable != 0 || st.HighestSeq != db.NextSeq()-1 {
		t.Fatalf("recatalogue = %+v; want the 30 hooks archived after the backup, highest seq %d", st, db.NextSeq()-1)
	}
	for id, want := range bodies {
		h, err := Fetch(ctx, restored, bs, id)
		if err != nil {
			t.Fatalf("hook %x: %v", id, err)
		}
		if !bytes.Equal(h.Body, want) {
			t.Fatalf("hook %x: body differs", id)
		}
	}
	if n := restored.Counts().ArchivePending; n != 0 {
		t.Fatalf("%d obligations of archived hooks left in the restored store", n)
	}
	rc := newTestCompactor(t, func() *store.DB { return restored }, bs, nil)
	if n := compactAll(t, rc); n != 0 || len(keys(t, bs, ".seg")) != before {
		t.Fatalf("the restored store's compactor wrote %d segments", n)
	}
	again, err := Recatalogue(ctx, restored, bs, "node-a", now()-86_400_000, now(), zerolog.Nop())
	if err != nil || again.Catalogued != 0 {
		t.Fatalf("a second recatalogue = %+v, %v; want nothing to do", again, err)
	}
}

// TestRecatalogueLeavesOutASegmentWithoutIndex: a segment whose index object is missing cannot be catalogued
// (its offsets are unknown); it is counted, and its seqs still count as taken.
func TestRecatalogueLeavesOutASegmentWithoutIndex(t *testing.T) {
	ctx := context.Background()
	bs := newLocal(t)
	db := openStore(t, t.TempDir())
	seg, _ := SegmentKeys("node-a", Day(now()), 5, 80)
	if err := bs.Put(ctx, seg, bytes.NewReader([]byte("segment")), 7); err != nil {
		t.Fatal(err)
	}
	st, err := Recatalogue(ctx, db, bs, "node-a", now()-1000, now(), zerolog.Nop())
	if err != nil || st.Unreadable != 1 || st.Catalogued != 0 || st.HighestSeq != 80 {
		t.Fatalf("recatalogue = %+v, %v; want one unreadable segment, highest seq 80", st, err)
	}
}
