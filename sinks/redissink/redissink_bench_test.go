package redissink

import (
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/services"
)

// BenchmarkDeliver measures confirmed PUBLISHes to a real Redis with one real subscriber draining the
// channel, by parallelism and body size; msgs/s is confirmed deliveries per second. Bodies stay small: Redis
// disconnects a subscriber that falls 8 MiB behind (client-output-buffer-limit pubsub), and the sink then
// rightly answers no_subscribers.
func BenchmarkDeliver(b *testing.B) {
	sub := subscribeKeeping(b, false)
	sinktest.BenchDeliver(b, sinktest.Bench{Parallel: []int{1, 16}, Sizes: []int{512, 4 << 10}, New: func(b *testing.B) sinks.Sink {
		return newSink(b, map[string]any{"url": "redis://" + services.RedisAddr, "channel": sub.channel})
	}})
}
