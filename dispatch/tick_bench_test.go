package dispatch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/store"
)

// buildBacklog commits n hooks (tiny bodies, one sink) for tenant t into a fresh store.
func buildBacklog(b *testing.B, n int) *store.DB {
	db, err := store.Open(store.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	sinks := []store.SinkBinding{{Index: 0, Type: "http"}}
	const group = 4096
	recs := make([]*store.Record, 0, group)
	val := store.AppendHook(nil, &store.Hook{Tenant: "t", Source: "s", Body: []byte("{}")})
	for done := 0; done < n; {
		recs = recs[:0]
		for i := 0; i < group && done < n; i++ {
			recs = append(recs, &store.Record{Tenant: "t", Source: "s", ReceivedAt: 1, Size: 2, Value: val, Sinks: sinks})
			done++
		}
		if _, err := db.CommitHooks(recs); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// BenchmarkSchedulerTick measures one scheduler scan over a backlog — the tenants with
// work (O(1) counter reads), one claim page of 128 rows from the head of the due index,
// the next due time — and puts the page back at the tail of the due index, so the
// backlog stays the same size as a draining queue's would. The design's claim: "The scan
// costs the tenants with work due, not the backlog".
func BenchmarkSchedulerTick(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("due=%d", n), func(b *testing.B) {
			db := buildBacklog(b, n)
			now := time.Now().UnixMilli() + 365*24*3600*1000 // every row is due
			tail := now
			var active []uint32
			var claims []store.Claimed
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				active = db.ActiveTenants(active[:0])
				for _, ord := range active {
					var err error
					claims, err = db.ClaimDue(ord, now, 128, 0, claims[:0])
					if err != nil {
						b.Fatal(err)
					}
					if _, _, err := db.NextDue(ord); err != nil {
						b.Fatal(err)
					}
					for i := range claims {
						tail++
						if err := db.Reschedule(&claims[i], 0, tail-365*24*3600*1000, ""); err != nil {
							b.Fatal(err)
						}
					}
				}
				_ = db.Counts()
			}
		})
	}
}
