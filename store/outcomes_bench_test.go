package store

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkOutcomeComplete settles one successful delivery per op (one sink per hook, the attempt's figures
// set as dispatch sets them), each its own outcome group: the unsynced batch that deletes the inflight key and
// the row. archive=on: the hook has an archive obligation, so it stays in the store and the delivery's
// attempts are kept beside it; archive=off: the hook goes with its last row. The claims are made with the
// timer stopped, in pages of 4096.
func BenchmarkOutcomeComplete(b *testing.B) {
	for _, archive := range []bool{false, true} {
		b.Run(fmt.Sprintf("archive=%t", archive), func(b *testing.B) {
			db := openTest(b, b.TempDir(), nil)
			val := AppendHook(nil, &Hook{Tenant: "acme", Source: "src", Body: make([]byte, 64)})
			sinks := []SinkBinding{{Index: 0, Type: "http"}}
			const page = 4096
			recs := make([]*Record, page)
			var cs []Claimed
			var ord uint32
			next := 0
			refill := func() {
				for i := range recs {
					recs[i] = &Record{Tenant: "acme", Source: "src", ReceivedAt: 1, Size: 64, Value: val, Sinks: sinks, Archive: archive}
				}
				commit(b, db, recs...)
				if ord == 0 {
					ord = ordOf(b, db, "acme")
				}
				var err error
				if cs, err = db.ClaimDue(ord, farFuture(), page, 0, cs[:0]); err != nil || len(cs) != page {
					b.Fatalf("claimed %d, %v", len(cs), err)
				}
				start := time.Now().UnixMilli()
				for i := range cs {
					cs[i].Last = Attempt{Number: 1, StartedAt: start, LatencyUS: 850, Class: AttemptOK, Status: 200}
				}
				next = 0
			}
			b.ReportAllocs()
			for b.Loop() {
				if next == len(cs) {
					b.StopTimer()
					refill()
					b.StartTimer()
				}
				if err := db.Complete(&cs[next]); err != nil {
					b.Fatal(err)
				}
				next++
			}
		})
	}
}
