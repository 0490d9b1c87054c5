package pubsubsink

import (
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// BenchmarkDeliver measures publishes to pstest on loopback, with parallel callers as a lane with
// concurrency runs them; the client batches concurrent calls into one request. msgs/s is the confirmed
// deliveries per second across all callers.
func BenchmarkDeliver(b *testing.B) {
	sinktest.BenchDeliver(b, sinktest.Bench{Parallel: []int{1, 16}, Sizes: []int{512, 16 << 10}, New: func(b *testing.B) sinks.Sink {
		f := newFake(b)
		f.topic(b, "bench")
		return f.sink(b, map[string]any{"topic": "bench"})
	}})
}
