package load

import (
	"math"
	"math/bits"
	"time"
)

// histogram is a log-linear latency histogram in nanoseconds, the shape HdrHistogram
// uses: values below 2^subBits are exact, above that each power-of-two range is split
// into 2^subBits buckets, so a bucket is at most 1/128 (0.8 %) of its value wide.
// Recording is an index computation and an increment: no allocation, no lock (each
// worker owns one; they are merged after the run).
type histogram struct {
	counts [histBuckets]uint64
	total  uint64
	max    uint64
}

const (
	subBits = 7
	subN    = 1 << subBits
	// maxBits caps recorded values at 2^maxBits ns (about 18 minutes): far above any
	// request timeout, and it keeps a worker's histogram at 35 KB.
	maxBits     = 40
	histBuckets = (maxBits-subBits)*subN + subN
)

func bucketOf(v uint64) int {
	if v < subN {
		return int(v)
	}
	if v >= 1<<maxBits {
		v = 1<<maxBits - 1
	}
	shift := bits.Len64(v) - subBits - 1
	return shift<<subBits + int(v>>uint(shift))
}

// bucketRange returns the smallest and largest value that land in bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < subN {
		return uint64(i), uint64(i)
	}
	shift := i>>subBits - 1
	m := uint64(i - shift<<subBits)
	return m << uint(shift), (m+1)<<uint(shift) - 1
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	v := uint64(d)
	h.counts[bucketOf(v)]++
	h.total++
	if v > h.max {
		h.max = v
	}
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	if o.max > h.max {
		h.max = o.max
	}
}

// quantile returns the value at quantile q (0 < q <= 1): the midpoint of the bucket
// holding the ceil(q*total)-th smallest value, never more than the recorded maximum.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := lo + (hi-lo)/2
			if v > h.max {
				v = h.max
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}
