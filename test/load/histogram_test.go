package load

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Every value lands in a bucket whose range contains it, and buckets are contiguous:
// the percentile walk depends on both.
func TestHistogramBucketsCoverEveryValue(t *testing.T) {
	prevHi := uint64(0)
	for i := 0; i < histBuckets; i++ {
		lo, hi := bucketRange(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d range [%d,%d] maps to %d,%d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		prevHi = hi
	}
	if prevHi != 1<<maxBits-1 {
		t.Fatalf("last bucket ends at %d, want %d", prevHi, uint64(1<<maxBits-1))
	}
	if bucketOf(1<<62) != histBuckets-1 {
		t.Fatalf("huge value not clamped into the last bucket")
	}
}

// Percentiles agree with an exact sort within the bucket width (0.8 %).
func TestHistogramQuantilesWithinBucketError(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h histogram
	vals := make([]time.Duration, 100_000)
	for i := range vals {
		// log-uniform between 10µs and 2s, the span ack latencies live in
		vals[i] = time.Duration(10_000 * math.Pow(200_000, r.Float64()))
		h.record(vals[i])
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		want := vals[int(q*float64(len(vals)))-1]
		got := h.quantile(q)
		diff := float64(got-want) / float64(want)
		if diff < -0.01 || diff > 0.01 {
			t.Errorf("q%.3f = %v, exact %v (%.2f%% off)", q, got, want, diff*100)
		}
	}
	if time.Duration(h.max) != vals[len(vals)-1] {
		t.Errorf("max %v, want %v", time.Duration(h.max), vals[len(vals)-1])
	}
	var empty histogram
	if empty.quantile(0.99) != 0 {
		t.Errorf("empty histogram quantile not 0")
	}
}

func TestHistogramMergeAddsCounts(t *testing.T) {
	var a, b histogram
	for i := 1; i <= 100; i++ {
		a.record(time.Duration(i) * time.Millisecond)
		b.record(time.Duration(i+100) * time.Millisecond)
	}
	a.merge(&b)
	if a.total != 200 || time.Duration(a.max) != 200*time.Millisecond {
		t.Fatalf("merged total %d max %v", a.total, time.Duration(a.max))
	}
	if p := a.quantile(0.5); p < 99*time.Millisecond || p > 101*time.Millisecond {
		t.Fatalf("merged p50 %v, want ~100ms", p)
	}
}
