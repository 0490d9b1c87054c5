package sinktest

import (
	"context"
	"fmt"
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
)

// Bench is the delivery benchmark of one sink: acknowledged Deliver calls by parallelism and body size.
type Bench struct {
	// New returns a sink to a working destination for one sub-benchmark; BenchDeliver closes it.
	New func(b *testing.B) sinks.Sink
	// Parallel lists the goroutines per GOMAXPROCS (b.SetParallelism) and Sizes the body sizes of the matrix.
	Parallel, Sizes []int
	// FreshIDs gives every Deliver a hook of its own, for a destination that drops a repeated hook id as a
	// duplicate (JetStream); otherwise one envelope is delivered again and again, as retries of a hook are.
	FreshIDs bool
	// After (may be nil) runs with the timer stopped once a sub-benchmark has run: a destination that keeps
	// every message is emptied there so it does not grow without bound.
	After func(b *testing.B)
}

// BenchDeliver runs bench as sub-benchmarks parallel=%d/size=%d, reporting allocations, bytes per second and
// msgs/s: the Deliver calls that returned nil per second, across all callers.
func BenchDeliver(b *testing.B, bench Bench) {
	for _, par := range bench.Parallel {
		for _, size := range bench.Sizes {
			b.Run(fmt.Sprintf("parallel=%d/size=%d", par, size), func(b *testing.B) {
				s := bench.New(b)
				defer s.Close()
				body := Binary(size)
				e := Envelope(body)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.SetParallelism(par)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						e := e
						if bench.FreshIDs {
							e = Envelope(body)
						}
						if err := s.Deliver(context.Background(), e); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
				if bench.After != nil {
					b.StopTimer()
					bench.After(b)
				}
			})
		}
	}
}
