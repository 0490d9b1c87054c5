package storage

import (
	"context"
	"testing"
	"time"
)

// work spins for d, as a compaction's reading or writing would keep the pacer's clock running.
func work(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

func TestPacerPausesInProportionWhileActive(t *testing.T) {
	p := NewPacer(context.Background(), 50, func() bool { return true })
	p.Step() // less than a slice of work: no pause
	if p.Slept() != 0 {
		t.Fatalf("paused %v after no work", p.Slept())
	}
	work(3 * time.Millisecond)
	before := time.Now()
	p.Step()
	// At 50 % the pause equals the work it pays for: at least the 3 ms spun.
	if got := p.Slept(); got < 3*time.Millisecond {
		t.Fatalf("paused %v after 3 ms of work at 50 %%, want >= 3ms", got)
	}
	// The unpaid work starts again at the pause, not at the pacer's start.
	if u, since := p.Unpaid(time.Time{}), time.Since(before); u > since {
		t.Fatalf("unpaid %v after a pause that started %v ago", u, since)
	}
}

func TestPacerDoesNotPauseWhenIdleOrCancelled(t *testing.T) {
	asked := 0
	p := NewPacer(context.Background(), 25, func() bool { asked++; return false })
	work(3 * time.Millisecond)
	before := time.Now()
	p.Step()
	if asked != 1 || p.Slept() != 0 {
		t.Fatalf("idle ingest: asked %d times, paused %v; want asked once, no pause", asked, p.Slept())
	}
	// The work was not paid for by a pause, but Step started a new slice: the actor's pause after the
	// compaction only covers what came after.
	if u, since := p.Unpaid(time.Time{}), time.Since(before); u > since {
		t.Fatalf("unpaid %v after a step made %v ago", u, since)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p = NewPacer(ctx, 1, func() bool { return true })
	work(3 * time.Millisecond)
	start := time.Now()
	p.Step() // would pause 99 x 3 ms; a stopping compactor must not wait for it
	if p.Slept() != 0 || time.Since(start) > time.Second {
		t.Fatalf("cancelled pacer paused %v (step took %v)", p.Slept(), time.Since(start))
	}
}

func TestPacerOffOutsideOneToNinetyNine(t *testing.T) {
	for _, pct := range []int{0, 100, -1} {
		p := NewPacer(context.Background(), pct, func() bool { return true })
		if p != nil {
			t.Fatalf("percent %d: pacer made, want none (not paced)", pct)
		}
		start := time.Now().Add(-time.Second)
		p.Step()
		if u := p.Unpaid(start); u < time.Second || p.Slept() != 0 {
			t.Fatalf("nil pacer: unpaid %v (want the whole run), slept %v", u, p.Slept())
		}
	}
}
