package rabbitsink

import (
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// BenchmarkDeliver measures confirmed, routed, persistent publishes to the machine's RabbitMQ with concurrent
// attempts pipelined on one confirm-mode channel. msgs/s is confirmed Deliver calls per second. The queue is
// purged between sub-benchmarks so it does not grow without bound.
func BenchmarkDeliver(b *testing.B) {
	br := newBroker(b)
	sinktest.BenchDeliver(b, sinktest.Bench{Parallel: []int{1, 16, 64}, Sizes: []int{512, 16 << 10},
		New: func(b *testing.B) sinks.Sink { return br.sink(b, br.url, map[string]any{"max_inflight": 4096}) },
		After: func(b *testing.B) {
			if _, err := br.ch.QueuePurge(br.queue, false); err != nil {
				b.Fatal(err)
			}
		}})
}
