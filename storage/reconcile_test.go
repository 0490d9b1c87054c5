package storage

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// TestHighestArchivedSeqReadsTheNodesSegmentsOfTheWindow proves what a restore reconciles against (inventory
// E.5: "m:next_seq moved past the highest archived seq"): the highest last seq among this node's segments of
// the days in the window, ignoring other nodes, other days and objects that are not segments.
func TestHighestArchivedSeqReadsTheNodesSegmentsOfTheWindow(t *testing.T) {
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

	got, err := HighestArchivedSeq(ctx, bs, "node-a", now.Add(-2*time.Hour).UnixMilli(), now.UnixMilli())
	if err != nil || got != 250 {
		t.Fatalf("HighestArchivedSeq = %d, %v; want 250", got, err)
	}
	got, err = HighestArchivedSeq(ctx, bs, "node-c", now.Add(-2*time.Hour).UnixMilli(), now.UnixMilli())
	if err != nil || got != 0 {
		t.Fatalf("HighestArchivedSeq of a node with no segment = %d, %v", got, err)
	}
}
