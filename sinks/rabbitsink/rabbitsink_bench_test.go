package rabbitsink

import (
	"context"
	"fmt"
	"testing"

	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// BenchmarkDeliver measures confirmed, routed, persistent publishes to the machine's RabbitMQ with concurrent
// attempts pipelined on one confirm-mode channel. msgs/s is confirmed Deliver calls per second. The queue is
// purged between sub-benchmarks so it does not grow without bound.
func BenchmarkDeliver(b *testing.B) {
	br := newBroker(b)
	for _, par := range []int{1, 16, 64} {
		for _, size := range []int{512, 16 << 10} {
			b.Run(fmt.Sprintf("parallel=%d/size=%d", par, size), func(b *testing.B) {
				s := br.sink(b, br.url, map[string]any{"max_inflight": 4096})
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
				b.StopTimer()
				if _, err := br.ch.QueuePurge(br.queue, false); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
