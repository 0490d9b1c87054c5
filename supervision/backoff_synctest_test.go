package supervision

import (
	"testing"
	"testing/synctest"
	"time"
)

// Inventory I.2: an isolated domain past its budget is "restarted later with backoff 1 s doubling to 60 s (reset
// after a minute up)". Run on synctest's clock with the production defaults, so the delays are exact.
func TestIsolatedBackoffDoublesToTheCapAndResetsAfterAMinuteUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		tree := h.start([]ChildSpec{h.spec("one"), h.isolated("m", "metrics")}, Options{
			MaxRestarts: -1, // no restart within the budget: every crash is an outage
			Rand:        func() float64 { return 1 },
		})
		id := tree.PID().Id + "/m"

		outage := func(i int, want time.Duration) {
			t.Helper()
			h.crash(id)
			synctest.Wait()
			down, downAt, ok := h.event(EventSubtreeDown, i)
			if !ok || down.Delay != want {
				t.Fatalf("outage %d: subtree_down %+v (found %v), want delay %s", i, down, ok, want)
			}
			time.Sleep(want - time.Nanosecond)
			synctest.Wait()
			if _, _, ok := h.event(EventSubtreeUp, i); ok {
				t.Fatalf("outage %d: up before its %s back-off", i, want)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			_, upAt, ok := h.event(EventSubtreeUp, i)
			if !ok || upAt.Sub(downAt) != want {
				t.Fatalf("outage %d: subtree_up found=%v after %s, want after %s", i, ok, upAt.Sub(downAt), want)
			}
		}
		i := 0
		for _, want := range []time.Duration{1, 2, 4, 8, 16, 32, 60, 60} {
			outage(i, want*time.Second)
			i++
		}
		time.Sleep(59 * time.Second) // up less than a minute: the back-off stays at the cap
		outage(i, 60*time.Second)
		i++
		time.Sleep(time.Minute) // a minute up: it starts over
		outage(i, time.Second)
		i++
		outage(i, 2*time.Second)

		if n := h.instances("one"); n != 1 {
			t.Fatalf("sibling started %d times, want 1", n)
		}
	})
}
