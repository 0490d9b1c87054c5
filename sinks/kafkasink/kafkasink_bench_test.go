package kafkasink

import (
	"context"
	"fmt"
	"testing"

	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// BenchmarkDeliver measures acknowledged deliveries (acks=all) to a three-broker kfake cluster, with
// concurrent attempts sharing produce requests. msgs/s is acknowledged Deliver calls per second.
func BenchmarkDeliver(b *testing.B) {
	c := newCluster(b)
	for _, par := range []int{1, 16, 64} {
		for _, size := range []int{512, 16 << 10} {
			b.Run(fmt.Sprintf("parallel=%d/size=%d", par, size), func(b *testing.B) {
				s := newTestSink(b, c.ListenAddrs(), nil)
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
