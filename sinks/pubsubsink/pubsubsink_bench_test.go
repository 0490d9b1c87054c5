package pubsubsink

import (
	"context"
	"fmt"
	"testing"

	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// BenchmarkDeliver measures publishes to pstest on loopback, with parallel callers as a lane with
// concurrency runs them; the client batches concurrent calls into one request. msgs/s is the confirmed
// deliveries per second across all callers.
func BenchmarkDeliver(b *testing.B) {
	for _, par := range []int{1, 16} {
		for _, size := range []int{512, 16 << 10} {
			b.Run(fmt.Sprintf("parallel=%d/size=%d", par, size), func(b *testing.B) {
				f := newFake(b)
				f.topic(b, "bench")
				s := f.sink(b, map[string]any{"topic": "bench"})
				e := sinktest.Envelope(sinktest.Binary(size))
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.SetParallelism(par)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := s.Deliver(context.Background(), e); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}
