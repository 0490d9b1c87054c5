package kafkasink

import (
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// BenchmarkDeliver measures acknowledged deliveries (acks=all) to a three-broker kfake cluster, with
// concurrent attempts sharing produce requests. msgs/s is acknowledged Deliver calls per second.
func BenchmarkDeliver(b *testing.B) {
	c := newCluster(b)
	sinktest.BenchDeliver(b, sinktest.Bench{Parallel: []int{1, 16, 64}, Sizes: []int{512, 16 << 10}, New: func(b *testing.B) sinks.Sink {
		return newTestSink(b, c.ListenAddrs(), nil)
	}})
}
