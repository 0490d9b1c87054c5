package dispatch

import (
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
)

// Inventory F.2: "delay = min(base·2^(n-1), max_ms) × U[0.5, 1.0] (full jitter); defaults
// 100 ms, 300 000 ms cap (reached by attempt 13), 84 attempts ≈ 21 709.5 s".
func TestRetryPolicyDefaults(t *testing.T) {
	p := PolicyFrom(config.Retry{BaseMS: 100, MaxMS: 300_000, MaxAttempts: 84, Jitter: true})
	var total time.Duration
	for n := 1; n < 84; n++ {
		hi, ok := p.Backoff(n, 1)
		if !ok {
			t.Fatalf("gave up after %d attempts", n)
		}
		lo, _ := p.Backoff(n, 0)
		if lo*2 != hi && hi != p.Max {
			t.Fatalf("attempt %d: jitter range [%v, %v] is not [d/2, d]", n, lo, hi)
		}
		want := min(100*time.Millisecond<<uint(n-1), 300*time.Second)
		if n > 20 {
			want = 300 * time.Second
		}
		if hi != want {
			t.Fatalf("attempt %d: delay %v, want %v", n, hi, want)
		}
		total += hi
	}
	if _, ok := p.Backoff(84, 0.5); ok {
		t.Fatal("84 attempts must give up")
	}
	if got, _ := p.Backoff(13, 1); got != 300*time.Second {
		t.Fatalf("the cap must be reached by attempt 13, got %v", got)
	}
	if total.Seconds() < 21_700 || total.Seconds() > 21_710 {
		t.Fatalf("sum of maximal delays %v, want ≈ 21 709.5 s", total)
	}
}

// Inventory D.1: "{:retry_after, ms, term} → next attempt ≥ ms (cap 1 h) or backoff, whichever later".
func TestRetryAfterFloorsTheBackoff(t *testing.T) {
	p := RetryPolicy{Base: 100 * time.Millisecond, Max: time.Minute, MaxAttempts: 10}
	if d, _ := p.NextAttempt(1, 5*time.Second, 0); d != 5*time.Second {
		t.Fatalf("retry-after 5s gave %v", d)
	}
	if d, _ := p.NextAttempt(1, 0, 0); d != 100*time.Millisecond {
		t.Fatalf("no retry-after gave %v", d)
	}
	if d, _ := p.NextAttempt(1, 5*time.Hour, 0); d != time.Hour {
		t.Fatalf("retry-after is capped at an hour, got %v", d)
	}
	if _, ok := p.NextAttempt(10, time.Second, 0); ok {
		t.Fatal("retry-after must not extend past max_attempts")
	}
}

// Inventory F.3: opens after N consecutive failures; period doubles to the max; one probe;
// success closes.
func TestBreakerOpensDoublesAndProbes(t *testing.T) {
	now := time.Unix(1000, 0)
	b := &breaker{failures: 3, openFor: time.Second, maxOpen: 3 * time.Second}
	for i := range 2 {
		if b.failure(now) {
			t.Fatalf("opened after %d failures", i+1)
		}
	}
	if !b.failure(now) {
		t.Fatal("did not open after 3 consecutive failures")
	}
	if ok, until := b.allow(now.Add(500 * time.Millisecond)); ok || !until.Equal(now.Add(time.Second)) {
		t.Fatalf("open breaker allowed an attempt (until %v)", until)
	}
	probeAt := now.Add(time.Second)
	if ok, _ := b.allow(probeAt); !ok {
		t.Fatal("no probe after the open period")
	}
	if ok, _ := b.allow(probeAt); ok {
		t.Fatal("a second probe while one is out")
	}
	if !b.failure(probeAt) {
		t.Fatal("a failed probe must reopen")
	}
	if b.state(probeAt.Add(1999*time.Millisecond)) != breakerOpen || b.state(probeAt.Add(2*time.Second)) != breakerHalfOpen {
		t.Fatal("second opening must last twice as long")
	}
	third := probeAt.Add(2 * time.Second)
	if ok, _ := b.allow(third); !ok || !b.failure(third) {
		t.Fatal("second probe must be allowed and its failure reopen")
	}
	if got := b.until.Sub(third); got != 3*time.Second {
		t.Fatalf("third opening lasts %v, want the 3s cap", got)
	}
	b.allow(b.until)
	if !b.success() || b.state(b.until) != breakerClosed {
		t.Fatal("a successful probe must close the breaker")
	}
	off := &breaker{failures: 0}
	for range 100 {
		if off.failure(now) {
			t.Fatal("breaker_failures 0 disables the breaker")
		}
	}
}
