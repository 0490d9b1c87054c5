package edge

import (
	"hash/maphash"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Rate limiting is GCRA (the generic cell rate algorithm): a bucket is one theoretical arrival time (TAT),
// the instant at which it would be full again. Taking n units moves the TAT n emission intervals into the
// future; a take is refused when that would put the TAT more than a burst's worth of intervals ahead of
// now. One atomic word per key, updated by compare-and-swap, is the whole state (the original: "GCRA, one
// ETS row per tenant, CAS update"), so taking from a bucket never blocks and a refusal never writes.
//
// Invariants:
//  1. Over any window of length d starting from a full bucket, grants total at most Burst + Rate·d units
//     (plus the cost of one oversized take, see 2), however many goroutines take at once.
//  2. A take larger than Burst is granted only when the bucket is full, and is charged whole: the bucket
//     then owes the excess, so the long-run rate holds and a body larger than the bucket is slow, not
//     impossible.
//  3. A refusal changes nothing: a flood of refused requests costs one atomic load each.

// maxAhead caps how far a TAT may move per take, so float rounding or an absurd rate cannot overflow.
const maxAhead = int64(1) << 60

// Limit is a rate: Rate units per second refilling a bucket of Burst units. A zero (or negative) Rate
// is unlimited.
type Limit struct {
	Rate  float64
	Burst float64
}

// Unlimited reports whether l grants everything.
func (l Limit) Unlimited() bool { return !(l.Rate > 0) }

// Bucket is one key's state: its theoretical arrival time in Unix nanoseconds. The zero Bucket is full.
type Bucket struct {
	tat atomic.Int64
}

// Take spends n units at now under l. When refused, retryAfter is how long until the same take would be
// granted (for n above Burst, until the bucket is full).
func (b *Bucket) Take(now time.Time, l Limit, n float64) (ok bool, retryAfter time.Duration) {
	if l.Unlimited() {
		return true, 0
	}
	t := now.UnixNano()
	interval := 1e9 / l.Rate // nanoseconds per unit
	cost := nanos(n * interval)
	burst := nanos(l.Burst * interval)
	for {
		old := b.tat.Load()
		tat := max(old, t)
		next := tat + cost
		if next-t > burst && tat > t {
			// Over budget (invariant 2: an oversized take passes only on a full bucket, tat == t).
			if cost > burst {
				return false, time.Duration(tat - t)
			}
			return false, time.Duration(next - t - burst)
		}
		if b.tat.CompareAndSwap(old, next) {
			return true, 0
		}
	}
}

// Refund gives back n units taken under l by a take whose purpose failed (nothing was
// kept for it): the TAT moves back by their cost, exactly undoing that take's charge.
func (b *Bucket) Refund(l Limit, n float64) {
	if l.Unlimited() {
		return
	}
	b.tat.Add(-nanos(n * 1e9 / l.Rate))
}

// full reports whether the bucket has refilled completely by now, so that dropping it loses nothing:
// a new bucket for the same key would be full too.
func (b *Bucket) full(now int64) bool { return b.tat.Load() <= now }

// nanos converts a float duration in nanoseconds to int64, clamped to [0, maxAhead]. It rounds down,
// for a take's cost and for the burst alike: k takes of n units then always fit a burst of k·n units
// (k·⌊x⌋ ≤ ⌊k·x⌋), and a take is undercharged by less than a nanosecond, a rate error below 0.1% for
// any take worth a microsecond or more.
func nanos(f float64) int64 {
	if !(f > 0) {
		return 0
	}
	if f >= float64(maxAhead) || math.IsInf(f, 1) {
		return maxAhead
	}
	return int64(f)
}

// limiterShards spreads keys over independent locks; a power of two so the shard is a mask of the hash.
const limiterShards = 64

// CapacityRetryAfter is the Retry-After of a new key refused because the limiter holds its maximum of
// keys, all still refilling: about when the janitor's next sweep may have made room.
const CapacityRetryAfter = time.Second

// Limiter holds one Bucket per key (a client address, a tenant, a source), at most maxKeys of them.
//
// Keys live in 64 shards. The hot path read-locks one shard, finds the key's bucket and takes from it
// under that read lock, so Sweep (which write-locks) never drops a bucket a take is charging. Only a
// new key write-locks its shard.
//
// When the limiter is full, a new key first reclaims a full (idle) bucket of its shard, which is lossless;
// when there is none, the new key is refused as if limited (CapacityRetryAfter). Evicting a bucket that
// is still refilling would hand its key a fresh burst, so an attacker cycling addresses could lift the
// limit of every other key; refusing newcomers keeps every existing key's limit exact, and the janitor's
// Sweep makes room as buckets refill.
type Limiter struct {
	seed    maphash.Seed
	maxKeys int64
	keys    atomic.Int64
	shards  [limiterShards]limiterShard
}

type limiterShard struct {
	mu sync.RWMutex
	m  map[string]*Bucket
	// busyUntil (Unix ns, under mu) is set when a full limiter found no idle bucket in this shard: until
	// then a new key is refused without scanning the shard again, so a flood of new keys costs O(1) each.
	busyUntil int64
	// Pads the shard to 128 bytes so neighbouring shards' locks never share a 64-byte cache line.
	_ [128 - 24 - 8 - 8]byte
}

// NewLimiter returns a limiter holding at most maxKeys keys (at least 1).
func NewLimiter(maxKeys int) *Limiter {
	l := &Limiter{seed: maphash.MakeSeed(), maxKeys: int64(max(maxKeys, 1))}
	for i := range l.shards {
		l.shards[i].m = map[string]*Bucket{}
	}
	return l
}

// Take spends n units of key's bucket under lim; see Bucket.Take. An unlimited lim creates no key.
func (l *Limiter) Take(key string, now time.Time, lim Limit, n float64) (bool, time.Duration) {
	if lim.Unlimited() {
		return true, 0
	}
	s := &l.shards[maphash.String(l.seed, key)&(limiterShards-1)]
	s.mu.RLock()
	if b, found := s.m[key]; found {
		ok, retry := b.Take(now, lim, n)
		s.mu.RUnlock()
		return ok, retry
	}
	s.mu.RUnlock()
	return l.takeNew(s, key, now, lim, n)
}

// TakeBytes is Take for a key held in a byte slice: a known key costs no allocation.
func (l *Limiter) TakeBytes(key []byte, now time.Time, lim Limit, n float64) (bool, time.Duration) {
	if lim.Unlimited() {
		return true, 0
	}
	s := &l.shards[maphash.Bytes(l.seed, key)&(limiterShards-1)]
	s.mu.RLock()
	if b, found := s.m[string(key)]; found {
		ok, retry := b.Take(now, lim, n)
		s.mu.RUnlock()
		return ok, retry
	}
	s.mu.RUnlock()
	return l.takeNew(s, string(key), now, lim, n)
}

// Refund gives back n units of key's bucket (see Bucket.Refund). A key no longer held
// refilled completely, so it is owed nothing.
func (l *Limiter) Refund(key string, lim Limit, n float64) {
	if lim.Unlimited() {
		return
	}
	s := &l.shards[maphash.String(l.seed, key)&(limiterShards-1)]
	s.mu.RLock()
	if b, found := s.m[key]; found {
		b.Refund(lim, n)
	}
	s.mu.RUnlock()
}

// takeNew adds key to its shard (write-locked) and takes from its new bucket.
func (l *Limiter) takeNew(s *limiterShard, key string, now time.Time, lim Limit, n float64) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, found := s.m[key]
	if !found {
		if !l.reserve() && (!l.reclaimLocked(s, now.UnixNano()) || !l.reserve()) {
			return false, CapacityRetryAfter
		}
		b = &Bucket{}
		s.m[key] = b
	}
	return b.Take(now, lim, n)
}

// reserve counts one more key if the limiter has room. Shards insert concurrently, so the count is
// claimed by compare-and-swap: the bound is exact, never overshot by racing shards.
func (l *Limiter) reserve() bool {
	for {
		n := l.keys.Load()
		if n >= l.maxKeys {
			return false
		}
		if l.keys.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// reclaimLocked drops the full buckets of s and reports whether any was dropped. It scans the shard at
// most once per busy period: when nothing can be dropped it records when the earliest bucket will be full.
func (l *Limiter) reclaimLocked(s *limiterShard, now int64) bool {
	if now < s.busyUntil {
		return false
	}
	earliest := int64(math.MaxInt64)
	dropped := false
	for k, b := range s.m {
		tat := b.tat.Load()
		if tat <= now {
			delete(s.m, k)
			l.keys.Add(-1)
			dropped = true
		} else {
			earliest = min(earliest, tat)
		}
	}
	if !dropped {
		s.busyUntil = earliest
		if len(s.m) == 0 {
			// Other shards hold every key; only a sweep of those frees room.
			s.busyUntil = now + int64(CapacityRetryAfter)
		}
	}
	return dropped
}

// Sweep drops every key whose bucket has refilled completely by now: dropping it loses nothing, since a
// new bucket for that key starts full too. The edge's janitor calls it periodically.
func (l *Limiter) Sweep(now time.Time) {
	t := now.UnixNano()
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for k, b := range s.m {
			if b.full(t) {
				delete(s.m, k)
				l.keys.Add(-1)
			}
		}
		s.busyUntil = 0
		s.mu.Unlock()
	}
}

// Reset forgets key: its next take starts from a full bucket (an override changed, a tenant was erased).
func (l *Limiter) Reset(key string) {
	s := &l.shards[maphash.String(l.seed, key)&(limiterShards-1)]
	s.mu.Lock()
	if _, found := s.m[key]; found {
		delete(s.m, key)
		l.keys.Add(-1)
	}
	s.busyUntil = 0
	s.mu.Unlock()
}

// Len is the number of keys held (a gauge for telemetry).
func (l *Limiter) Len() int { return int(l.keys.Load()) }

// IPKey is the rate-limit key of a client address: an IPv4 address (or an IPv4-mapped
// IPv6 one) is its own key, an IPv6 address is keyed by its /64, the smallest block a
// site is routed and the least one host can be expected to hold. Keys of the two families
// differ in length, so they never collide. It returns a slice of ip: no allocation.
func IPKey(ip net.IP) []byte {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	if len(ip) == net.IPv6len {
		return ip[:8]
	}
	return ip
}
