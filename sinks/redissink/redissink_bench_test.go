package redissink

import (
	"context"
	"fmt"
	"testing"

	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/services"
)

// BenchmarkDeliver measures confirmed PUBLISHes to a real Redis with one real subscriber draining the
// channel, by parallelism and body size; msgs/s is confirmed deliveries per second. Bodies stay small: Redis
// disconnects a subscriber that falls 8 MiB behind (client-output-buffer-limit pubsub), and the sink then
// rightly answers no_subscribers.
func BenchmarkDeliver(b *testing.B) {
	sub := subscribeKeeping(b, false)
	for _, par := range []int{1, 16} {
		for _, size := range []int{512, 4 << 10} {
			b.Run(fmt.Sprintf("parallel=%d/size=%d", par, size), func(b *testing.B) {
				s := newSink(b, map[string]any{"url": "redis://" + services.RedisAddr, "channel": sub.channel})
				defer s.Close()
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
