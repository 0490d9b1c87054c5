package storage

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/store"
)

// ReplayNext is the read an archive replay job makes at each cursor (inventory F.5, archive kind; seed: "a
// replay skips a segment whose objects are gone"). Walked from the start with the cursor each batch returns, it
// yields every hook received in [from, to) once, in seq order, one segment per batch, skipping (and counting)
// the segment whose object was deleted; a cursor inside a segment yields only the hooks after it.
func TestReplayNextWalksTheWindowOnceFromAnyCursor(t *testing.T) {
	ctx := context.Background()
	bs := newLocal(t)
	db := openStore(t, t.TempDir())
	c := newTestCompactor(t, func() *store.DB { return db }, bs, nil)
	base := now() - 100_000
	var seqs []uint64 // by hook i, received at base+i
	for seg := range 4 {
		for i := range 3 {
			n := seg*3 + i
			commit(t, db, hookAt(base+int64(n), body(n, 50)))
			seqs = append(seqs, db.NextSeq()-1)
		}
		compactAll(t, c)
	}
	from, to := base+1, base+11 // hooks 1..10
	var gone store.SegmentEntry
	n := 0
	if err := db.Segments(0, 0, func(e store.SegmentEntry) error {
		if n == 2 {
			gone = e
		}
		n++
		return nil
	}); err != nil || n != 4 {
		t.Fatalf("%d segments, %v; want 4", n, err)
	}
	if err := bs.Delete(ctx, gone.SegmentKey); err != nil { // hooks 6..8
		t.Fatal(err)
	}

	var got []uint64
	skipped, batches := 0, 0
	var pos store.ArchiveCursor
	for {
		b, err := ReplayNext(ctx, db, bs, from, to, pos, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range b.Hooks {
			got = append(got, h.Seq)
		}
		skipped += b.Skipped
		pos = b.Next
		if b.Done {
			break
		}
		if batches++; batches > 10 {
			t.Fatal("the walk never ends")
		}
	}
	want := []uint64{seqs[1], seqs[2], seqs[3], seqs[4], seqs[5], seqs[9], seqs[10]}
	if len(got) != len(want) || skipped != 1 {
		t.Fatalf("walk gave seqs %v, %d skipped; want %v, 1 skipped", got, skipped, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("walk gave seqs %v; want %v", got, want)
		}
	}

	// Resumed inside the second segment, after its first hook: the rest of it, then the next readable one.
	b, err := ReplayNext(ctx, db, bs, from, to, store.ArchiveCursor{Segment: seqs[3], Seq: seqs[3]}, zerolog.Nop())
	if err != nil || len(b.Hooks) != 2 || b.Hooks[0].Seq != seqs[4] || b.Next.Seq != seqs[5] {
		t.Fatalf("resumed batch %+v, %v; want hooks 4 and 5", b, err)
	}
}
