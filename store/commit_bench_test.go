package store

import (
	"fmt"
	"testing"
)

// BenchmarkCommitHooks measures one synced group commit by group size, 1 KiB bodies, one sink each. The
// fsync dominates; per-record cost shows as the drop in ns/op per record as groups grow.
func BenchmarkCommitHooks(b *testing.B) {
	for _, group := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("group=%d/body=1KiB", group), func(b *testing.B) {
			db := openTest(b, b.TempDir(), nil)
			recs := make([]*Record, group)
			for i := range recs {
				recs[i] = makeRecord(b, fmt.Sprintf("tenant-%d", i%8), 1024, SinkBinding{Index: 0, Type: "http"})
			}
			// First commit assigns the tenant ordinals, so the loop measures the steady state.
			if _, err := db.CommitHooks(recs); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(group * 1024))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.CommitHooks(recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*group), "ns/record")
		})
	}
}
