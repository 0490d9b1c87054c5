package edge

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

// take asserts one Bucket.Take outcome.
func take(t *testing.T, b *Bucket, now time.Time, l Limit, n float64, wantOK bool, wantRetry time.Duration) {
	t.Helper()
	ok, retry := b.Take(now, l, n)
	if ok != wantOK || retry != wantRetry {
		t.Fatalf("Take(%v, %+v, %v) = %v, %v; want %v, %v", now.Sub(t0), l, n, ok, retry, wantOK, wantRetry)
	}
}

// Design: "Over the limit is 429 with Retry-After"; inventory G.3 "GCRA". A full bucket grants its burst
// at once, then one take per emission interval, and Retry-After is exactly the wait for the next grant.
func TestBucketGrantsBurstThenSteadyRate(t *testing.T) {
	var b Bucket
	l := Limit{Rate: 10, Burst: 5}
	for i := 0; i < 5; i++ {
		take(t, &b, t0, l, 1, true, 0)
	}
	take(t, &b, t0, l, 1, false, 100*time.Millisecond)
	take(t, &b, at(40*time.Millisecond), l, 1, false, 60*time.Millisecond)
	take(t, &b, at(100*time.Millisecond), l, 1, true, 0)
	take(t, &b, at(100*time.Millisecond), l, 1, false, 100*time.Millisecond)
	// Steady state: one grant per 100 ms, never two.
	for i := 2; i < 50; i++ {
		now := at(time.Duration(i) * 100 * time.Millisecond)
		take(t, &b, now, l, 1, true, 0)
		take(t, &b, now, l, 1, false, 100*time.Millisecond)
	}
	// Idle long enough, the bucket is full again and grants a whole burst, not more.
	now := at(time.Hour)
	take(t, &b, now, l, 5, true, 0)
	take(t, &b, now, l, 1, false, 100*time.Millisecond)
	// A refused take costs nothing: the bucket refills on schedule however many were refused.
	for i := 0; i < 1000; i++ {
		b.Take(now, l, 1)
	}
	take(t, &b, now.Add(100*time.Millisecond), l, 1, true, 0)
}

// Inventory B.3: rate_limits rate is "hooks/s (fractions ok)".
func TestBucketFractionalRates(t *testing.T) {
	var b Bucket
	l := Limit{Rate: 0.5, Burst: 1} // one hook every 2 s
	take(t, &b, t0, l, 1, true, 0)
	take(t, &b, at(time.Second), l, 1, false, time.Second)
	take(t, &b, at(2*time.Second), l, 1, true, 0)

	var c Bucket
	l = Limit{Rate: 3, Burst: 3} // an emission interval that is not a whole number of nanoseconds
	for i := 0; i < 3; i++ {
		take(t, &c, t0, l, 1, true, 0)
	}
	if ok, _ := c.Take(t0, l, 1); ok {
		t.Fatal("a fourth take fitted a burst of 3")
	}
	// Over 300 s at 3/s, 900 grants plus the burst, within the sub-nanosecond rounding of each take.
	grants := 0
	for ms := 0; ms <= 300_000; ms++ {
		if ok, _ := c.Take(at(time.Duration(ms)*time.Millisecond), l, 1); ok {
			grants++
		}
	}
	if grants != 900 {
		t.Fatalf("%d grants in 300 s at 3/s after the burst, want 900", grants)
	}
}

// Design: the per-source limit is "in body bytes per second", charged by Content-Length. A body larger
// than the bucket is granted on a full bucket and charged whole, so the long-run rate still holds.
func TestBucketChargesByteCostsAndOversizedTakes(t *testing.T) {
	var b Bucket
	l := Limit{Rate: 1000, Burst: 4000} // bytes
	take(t, &b, t0, l, 3000, true, 0)
	take(t, &b, t0, l, 2000, false, time.Second) // 1000 left; 1000 more bytes take 1 s
	take(t, &b, at(time.Second), l, 2000, true, 0)
	// Bucket empty at t0+1s. An oversized body waits until the bucket is full (4 s), not forever.
	take(t, &b, at(time.Second), l, 10_000, false, 4*time.Second)
	take(t, &b, at(5*time.Second), l, 10_000, true, 0)
	// It was charged whole: the bucket owes 6 s (10 s of bytes less the 4 s burst) beyond a full refill.
	take(t, &b, at(5*time.Second), l, 1, false, 6*time.Second+time.Millisecond)
	take(t, &b, at(11*time.Second), l, 1, false, time.Millisecond)
	take(t, &b, at(11*time.Second+time.Millisecond), l, 1, true, 0)
}

func TestUnlimitedGrantsEverythingAndCreatesNoKey(t *testing.T) {
	var b Bucket
	for _, l := range []Limit{{}, {Rate: 0, Burst: 5}, {Rate: -1, Burst: 1}} {
		if ok, retry := b.Take(t0, l, 1e12); !ok || retry != 0 {
			t.Fatalf("unlimited %+v refused", l)
		}
	}
	lim := NewLimiter(10)
	if ok, _ := lim.Take("k", t0, Limit{}, 1); !ok || lim.Len() != 0 {
		t.Fatalf("unlimited take: ok=%v, %d keys", ok, lim.Len())
	}
}

// Inventory G.3: "GCRA, one ETS row per tenant, CAS update". Many goroutines taking from one key never
// get more than the budget: exactly the burst at one instant, at most burst + rate·elapsed over time.
func TestLimiterNeverGrantsMoreThanTheBudgetUnderConcurrency(t *testing.T) {
	lim := NewLimiter(1000)
	l := Limit{Rate: 1000, Burst: 50}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if ok, _ := lim.Take("tenant", t0, l, 1); ok {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if g := granted.Load(); g != 50 {
		t.Fatalf("%d grants at one instant from a burst of 50", g)
	}

	// A moving clock: every attempt advances a shared fake clock by 10 µs, so N attempts span N·10 µs,
	// and goroutines race with each other's (possibly older) instants. The byte-keyed path is used too.
	granted.Store(0)
	var clock, attempts atomic.Int64
	start := t0.Add(time.Hour) // the bucket is full again
	clock.Store(start.UnixNano())
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []byte("tenant")
			for i := 0; i < 2000; i++ {
				now := time.Unix(0, clock.Add(int64(10*time.Microsecond)))
				attempts.Add(1)
				if ok, _ := lim.TakeBytes(key, now, l, 1); ok {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Duration(attempts.Load()) * 10 * time.Microsecond // 640 ms
	budget := 50 + int64(elapsed.Seconds()*1000)
	if g := granted.Load(); g > budget || g < budget*9/10 {
		t.Fatalf("%d grants over %v at 1000/s with burst 50, budget %d", g, elapsed, budget)
	}
}

// Design: a limit "per client address" must not let an address flood grow memory without bound.
// A full limiter reclaims refilled buckets, refuses newcomers while every bucket is refilling, and
// never touches an existing key's budget.
func TestLimiterHoldsAtMostMaxKeys(t *testing.T) {
	lim := NewLimiter(100)
	l := Limit{Rate: 1, Burst: 2}
	for i := 0; i < 100; i++ {
		if ok, _ := lim.Take(fmt.Sprint("10.0.0.", i), t0, l, 1); !ok {
			t.Fatalf("key %d refused below the bound", i)
		}
	}
	for i := 100; i < 1000; i++ {
		ok, retry := lim.Take(fmt.Sprint("10.0.0.", i), t0, l, 1)
		if ok || retry != CapacityRetryAfter {
			t.Fatalf("key %d past the bound: %v, %v", i, ok, retry)
		}
	}
	if lim.Len() != 100 {
		t.Fatalf("%d keys held, bound 100", lim.Len())
	}
	// An existing key keeps its exact budget: one token left of its burst of 2.
	if ok, _ := lim.Take("10.0.0.7", t0, l, 1); !ok {
		t.Fatal("an existing key lost its budget to the flood")
	}
	if ok, _ := lim.Take("10.0.0.7", t0, l, 1); ok {
		t.Fatal("an existing key got a fresh burst")
	}
	// Once the buckets have refilled (1 s), newcomers reclaim them without any sweep.
	for i := 1000; i < 1100; i++ {
		if ok, _ := lim.Take(fmt.Sprint("10.0.0.", i), at(2*time.Second), l, 1); !ok {
			// Another shard may hold the refilled keys; a sweep frees them.
			lim.Sweep(at(2 * time.Second))
			if ok, _ := lim.Take(fmt.Sprint("10.0.0.", i), at(2*time.Second), l, 1); !ok {
				t.Fatalf("newcomer %d refused after every bucket refilled and a sweep", i)
			}
		}
	}
	if lim.Len() > 100 {
		t.Fatalf("%d keys held, bound 100", lim.Len())
	}
}

// The bound holds when many shards take new keys at once.
func TestLimiterBoundIsExactUnderConcurrentNewKeys(t *testing.T) {
	lim := NewLimiter(500)
	l := Limit{Rate: 1, Burst: 1}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if ok, _ := lim.Take(fmt.Sprint(g, "/", i), t0, l, 1); ok {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if lim.Len() != 500 || granted.Load() != 500 {
		t.Fatalf("%d keys held and %d granted, bound 500", lim.Len(), granted.Load())
	}
}

// The janitor's Sweep drops exactly the keys whose bucket has refilled: dropping them loses nothing.
func TestSweepDropsOnlyRefilledKeys(t *testing.T) {
	lim := NewLimiter(1000)
	slow := Limit{Rate: 1, Burst: 10}  // 10 s to refill after 10 takes
	fast := Limit{Rate: 100, Burst: 1} // 10 ms
	for i := 0; i < 10; i++ {
		lim.Take("slow", t0, slow, 1)
	}
	lim.Take("fast", t0, fast, 1)
	lim.Sweep(t0)
	if lim.Len() != 2 {
		t.Fatalf("%d keys after a sweep at the same instant, want 2", lim.Len())
	}
	lim.Sweep(at(10 * time.Millisecond))
	if lim.Len() != 1 {
		t.Fatalf("%d keys after the fast bucket refilled, want 1", lim.Len())
	}
	if ok, _ := lim.Take("slow", at(5*time.Second), slow, 6); ok {
		t.Fatal("the slow key lost its state in a sweep")
	}
	lim.Sweep(at(10 * time.Second))
	if lim.Len() != 0 {
		t.Fatalf("%d keys after every bucket refilled, want 0", lim.Len())
	}

	lim.Take("k", t0, fast, 1)
	if ok, _ := lim.Take("k", t0, fast, 1); ok {
		t.Fatal("burst 1 granted twice")
	}
	lim.Reset("k")
	if ok, _ := lim.Take("k", t0, fast, 1); !ok || lim.Len() != 1 {
		t.Fatal("Reset did not forget the key")
	}
}

// DESIGN §3: verify, dedupe, store_headers and the tenant charge "are CPU work and must not queue".
// A known key's take allocates nothing.
func TestLimiterTakeOfAKnownKeyDoesNotAllocate(t *testing.T) {
	lim := NewLimiter(10)
	l := Limit{Rate: 1e6, Burst: 1e6}
	key := []byte("203.0.113.9")
	lim.TakeBytes(key, t0, l, 1)
	now := t0
	if a := testing.AllocsPerRun(1000, func() { lim.TakeBytes(key, now, l, 1) }); a != 0 {
		t.Fatalf("TakeBytes allocates %v per call", a)
	}
	if a := testing.AllocsPerRun(1000, func() { lim.Take("203.0.113.9", now, l, 1) }); a != 0 {
		t.Fatalf("Take allocates %v per call", a)
	}
}

func TestLimiterShardIsCacheLinePadded(t *testing.T) {
	if s := unsafe.Sizeof(limiterShard{}); s != 128 {
		t.Fatalf("limiterShard is %d bytes, want 128", s)
	}
}

func BenchmarkLimiterTake(b *testing.B) {
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			lim := NewLimiter(1 << 16)
			l := Limit{Rate: 1e9, Burst: 1e9}
			keys := make([][]byte, 1024)
			for i := range keys {
				keys[i] = []byte(fmt.Sprint("10.1.", i/256, ".", i%256))
			}
			b.SetParallelism(par)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					lim.TakeBytes(keys[i&1023], t0, l, 1)
					i++
				}
			})
		})
	}
}

// Issue: "IPv6 rate-limit keys per address instead of per /64". A host given a /64 can use 2^64 addresses, so
// every address of one /64 is one key; IPv4 stays per address, and the families never share a key.
func TestIPKeyIsTheAddressForIPv4AndThe64ForIPv6(t *testing.T) {
	key := func(s string) string { return string(IPKey(net.ParseIP(s))) }
	if key("2001:db8:1:2::1") != key("2001:db8:1:2:ffff:ffff:ffff:ffff") {
		t.Fatal("two addresses of one /64 have different keys")
	}
	if key("2001:db8:1:2::1") == key("2001:db8:1:3::1") {
		t.Fatal("two /64s share a key")
	}
	if key("192.0.2.1") == key("192.0.2.2") {
		t.Fatal("two IPv4 addresses share a key")
	}
	if key("192.0.2.1") != key("::ffff:192.0.2.1") || len(key("192.0.2.1")) != 4 {
		t.Fatal("an IPv4-mapped address is not keyed as its IPv4 address")
	}
	if k := key("2001:db8::1"); len(k) != 8 {
		t.Fatalf("IPv6 key of %d bytes, want the 8 of a /64", len(k))
	}
	ip := net.ParseIP("2001:db8::1")
	if n := testing.AllocsPerRun(100, func() { _ = IPKey(ip) }); n != 0 {
		t.Fatalf("IPKey allocates %v times", n)
	}
}

// A refund undoes exactly one take: the bucket grants it again, and no more than that.
func TestRefundGivesBackOneTake(t *testing.T) {
	l := NewLimiter(8)
	lim := Limit{Rate: 1, Burst: 2}
	for range 2 {
		if ok, _ := l.Take("pen", t0, lim, 1); !ok {
			t.Fatal("burst refused")
		}
	}
	if ok, _ := l.Take("pen", t0, lim, 1); ok {
		t.Fatal("granted past the burst")
	}
	l.Refund("pen", lim, 1)
	if ok, _ := l.Take("pen", t0, lim, 1); !ok {
		t.Fatal("the refunded token was not granted")
	}
	if ok, _ := l.Take("pen", t0, lim, 1); ok {
		t.Fatal("a refund gave back more than one take")
	}
	l.Refund("unknown", lim, 1) // a key not held is owed nothing and is not created
	if n := l.Len(); n != 1 {
		t.Fatalf("limiter holds %d keys, want 1", n)
	}
}
