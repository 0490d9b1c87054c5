package sqssink

import (
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// BenchmarkDeliver measures SendMessage attempts against goaws on loopback, with parallel callers as a lane
// with concurrency runs them. msgs/s is the confirmed deliveries per second across all callers.
func BenchmarkDeliver(b *testing.B) {
	c := NewConsumer(b)
	q := c.CreateQueue(b, "bench", nil)
	sinktest.BenchDeliver(b, sinktest.Bench{Parallel: []int{1, 16}, Sizes: []int{512, 16 << 10},
		New:   func(b *testing.B) sinks.Sink { return newSink(b, map[string]any{"queue_url": q}) },
		After: func(b *testing.B) { c.Purge(b, q) }, // goaws keeps every message in memory
	})
}
