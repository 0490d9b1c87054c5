package store

import (
	"fmt"
	"testing"
)

// BenchmarkPutQuarantine measures one pen tick: a synced PutQuarantine of a tick's entries (1 KiB bodies, fresh
// ids each time, so every entry is new and pays its held-already read). The fsync dominates; the per-entry cost
// shows as the drop in ns/entry as ticks grow.
func BenchmarkPutQuarantine(b *testing.B) {
	for _, tick := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("entries=%d/body=1KiB", tick), func(b *testing.B) {
			db := openTest(b, b.TempDir(), nil)
			entries := make([]QuarantineEntry, tick)
			for i := range entries {
				entries[i] = penEntry(b, fmt.Sprintf("src-%d", i%8), 1_700_000_000_000, 1024)
			}
			b.SetBytes(int64(tick * 1024))
			b.ReportAllocs()
			n := int64(0)
			for b.Loop() {
				for i := range entries {
					n++
					entries[i].Hook.ReceivedAt = 1_700_000_000_000 + n
				}
				if err := db.PutQuarantine(entries, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tick), "ns/entry")
		})
	}
}
