package storage

import (
	"context"
	"fmt"
	"testing"

	"github.com/ankusa-go/ankusa/store"
)

// BenchmarkCompaction measures the compactor's throughput into segments on LocalFS (MB/s of hook bodies):
// each op compacts perOp freshly committed hooks — read the obligations and hooks, encode, put segment, index
// and manifest (each fsynced), catalogue and clear in one synced batch. The commit is outside the timer.
func BenchmarkCompaction(b *testing.B) {
	for _, m := range []struct{ perOp, size int }{{1000, 256}, {1000, 1024}, {8000, 1024}, {1000, 10 << 10}} {
		perOp, size := m.perOp, m.size
		b.Run(fmt.Sprintf("hooks=%d/body=%d", perOp, size), func(b *testing.B) {
			db := openStore(b, b.TempDir())
			bs := newLocal(b)
			c := newTestCompactor(b, func() *store.DB { return db }, bs, func(o *CompactorOptions) { o.RollBytes = 16 << 20 })
			recs := make([]*store.Record, perOp)
			b.ReportAllocs()
			b.SetBytes(int64(perOp * size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := range recs {
					recs[j] = hookAt(now(), body(j, size))
				}
				commit(b, db, recs...)
				b.StartTimer()
				for {
					res, err := c.Compact(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if !res.More {
						break
					}
				}
			}
		})
	}
}
