package natssink

import (
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/services"
)

// BenchmarkDeliver measures acknowledged JetStream publishes (memory storage, one replica) on the machine's
// NATS, by parallelism and body size; msgs/s is acked deliveries per second. Every publish is a hook of its
// own: one id would be a duplicate the stream drops.
func BenchmarkDeliver(b *testing.B) {
	sinktest.BenchDeliver(b, sinktest.Bench{Parallel: []int{1, 16}, Sizes: []int{512, 16 << 10}, FreshIDs: true, New: func(b *testing.B) sinks.Sink {
		st := newStream(b)
		return newSink(b, map[string]any{"servers": "nats://" + services.NATSAddr, "subject": st.subject})
	}})
}
