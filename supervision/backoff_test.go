package supervision

import (
	"testing"
	"time"
)

// Inventory I.2: "restarted later with backoff 1 s doubling to 60 s", jittered so domains do not return together.
func TestBackoffDoublesCapsAndJittersIntoTheUpperHalf(t *testing.T) {
	f := func(attempt int, r float64, want time.Duration) {
		t.Helper()
		if got := backoff(attempt, time.Second, 60*time.Second, r); got != want {
			t.Fatalf("backoff(%d, r=%v) = %s, want %s", attempt, r, got, want)
		}
	}
	// r = 1: the undamped sequence doubles and stops at the cap.
	f(0, 1, time.Second)
	f(1, 1, 2*time.Second)
	f(2, 1, 4*time.Second)
	f(5, 1, 32*time.Second)
	f(6, 1, 60*time.Second)
	f(50, 1, 60*time.Second) // no overflow however long the outage
	// r = 0: half of it.
	f(0, 0, 500*time.Millisecond)
	f(3, 0, 4*time.Second)
	f(9, 0, 30*time.Second)
	// In between, linear in r.
	f(0, 0.5, 750*time.Millisecond)
	// Out-of-range jitter sources are clamped.
	f(0, -3, 500*time.Millisecond)
	f(0, 7, time.Second)

	for attempt := range 10 {
		prev := time.Duration(0)
		for _, r := range []float64{0, 0.25, 0.5, 0.99} {
			d := backoff(attempt, 10*time.Millisecond, 200*time.Millisecond, r)
			if d < prev {
				t.Fatalf("backoff not monotonic in r at attempt %d", attempt)
			}
			prev = d
		}
	}
}
