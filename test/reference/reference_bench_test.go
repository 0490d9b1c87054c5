package reference

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/test/load"
)

// benchDuration is the measured span of a load benchmark: ANKUSA_BENCH_SECONDS
// (default 5), after a one-second warm-up.
func benchDuration(b *testing.B) time.Duration {
	v := os.Getenv("ANKUSA_BENCH_SECONDS")
	if v == "" {
		return 5 * time.Second
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs <= 0 {
		b.Fatalf("ANKUSA_BENCH_SECONDS=%q is not a positive number", v)
	}
	return time.Duration(secs * float64(time.Second))
}

// BenchmarkReferenceLoopback measures the reference receiver with 64 closed-loop
// workers posting 1 KB bodies over loopback for a fixed duration and reports
// hooks/s, p50_ms and p99_ms (design §8: a loopback load benchmark reported against
// a reference measured in the same run). A load run is not an operation: it runs
// once, in the first iteration, whatever b.N is; ns/op is meaningless and reported
// as 0.
func BenchmarkReferenceLoopback(b *testing.B) {
	d := benchDuration(b)
	s, err := Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	}()
	var rep load.Report
	first := true
	for b.Loop() {
		if !first {
			continue
		}
		first = false
		rep, err = load.Measure(context.Background(), s.URL(), load.Options{Workers: 64, BodyBytes: 1024, Duration: d})
		if err != nil {
			b.Fatal(err)
		}
	}
	if rep.Accepted == 0 {
		b.Fatalf("no hook accepted: %v", rep)
	}
	b.Logf("reference: %v", rep)
	load.ReportTo(b, rep, "")
	b.ReportMetric(0, "ns/op")
}
