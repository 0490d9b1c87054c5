package natssink

import (
	"context"
	"fmt"
	"testing"

	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/services"
)

// BenchmarkDeliver measures acknowledged JetStream publishes (memory storage, one replica) on the machine's
// NATS, by parallelism and body size; msgs/s is acked deliveries per second.
func BenchmarkDeliver(b *testing.B) {
	for _, par := range []int{1, 16} {
		for _, size := range []int{512, 16 << 10} {
			b.Run(fmt.Sprintf("parallel=%d/size=%d", par, size), func(b *testing.B) {
				st := newStream(b)
				s := newSink(b, map[string]any{"servers": "nats://" + services.NATSAddr, "subject": st.subject})
				defer s.Close()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.SetParallelism(par)
				body := sinktest.Binary(size)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						// A fresh id per publish: one id would be a duplicate the stream drops.
						if err := s.Deliver(context.Background(), sinktest.Envelope(body)); err != nil {
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
