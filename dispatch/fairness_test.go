//go:build !race

// The fairness figures are timings: they are taken in a build without the race
// detector, whose slowdown is uneven across goroutines (`make test` runs this file in
// its own non-race pass).

package dispatch_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// lagRecorder measures, per tenant, how old each hook is when its sink gets it.
type lagRecorder struct {
	mu   sync.Mutex
	lags map[string][]time.Duration
}

func (l *lagRecorder) p99(tenant string) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := slices.Clone(l.lags[tenant])
	if len(ls) == 0 {
		return 0, 0
	}
	slices.Sort(ls)
	return ls[len(ls)*99/100], len(ls)
}

// fairnessRun ingests light hooks for tenant B at a steady pace (and, when heavy, behind
// a backlog of 99 times as many for tenant A, whose sink is slow) and returns B's p99
// delivery lag.
func fairnessRun(t testing.TB, heavy bool) (time.Duration, int) {
	rec := &lagRecorder{lags: map[string][]time.Duration{}}
	respond := func(slow time.Duration) func(received, int) (int, http.Header, time.Duration) {
		return func(r received, _ int) (int, http.Header, time.Duration) {
			// Delivery lag is measured from the hook's received_at, as
			// ankusa_delivery_latency_seconds is: the UUIDv7 id carries it (ms).
			at, ok := fixture.ReceivedAt(r.id)
			if !ok {
				return 400, nil, 0
			}
			rec.mu.Lock()
			rec.lags[r.tenant] = append(rec.lags[r.tenant], r.at.Sub(at))
			rec.mu.Unlock()
			return 200, nil, slow
		}
	}
	slow := newSinkServer(t, respond(20*time.Millisecond))
	fast := newSinkServer(t, respond(0))
	inst := start(t, map[string]config.Source{
		"a": httpSource("tenant-a", slow.URL, false),
		"b": httpSource("tenant-b", fast.URL, false),
	}, func(c *config.Config) {
		c.Dispatch.Concurrency = 16
		// Fairness is dispatch's: the compactor archiving the backlog beside it is noise in a timing.
		c.Node.Roles = []string{config.RoleEdge, config.RoleDispatch}
	})

	const rounds = 200
	if heavy {
		// Tenant A's backlog, 99 hooks per light hook, is ingested first: B's hooks then
		// queue behind it at the scheduler while A's slow sink drains it.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range rounds * 99 / 8 {
					if _, err := tryIngest(inst, "/webhooks/a", fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	for range rounds {
		ingest(t, inst, "/webhooks/b", []byte(`{"light":true}`))
		time.Sleep(25 * time.Millisecond)
	}
	if heavy {
		if _, n := rec.p99("tenant-a"); n >= rounds*99 {
			t.Fatalf("tenant A's backlog was drained before B's hooks ran behind it")
		}
	}
	poll.True(t, 30*time.Second, "tenant B's hooks", func() bool { _, n := rec.p99("tenant-b"); return n == rounds })
	return rec.p99("tenant-b")
}

// Design: "tenant fairness ... runs 99:1 load behind a slow sink and holds the light
// tenant's p99 delivery lag within 2x of its solo p99". The solo p99 is floored at 5 ms
// so that timer noise on an idle run does not make the bound meaningless. A p99 of 200
// samples is one unlucky fsync away from the maximum on a shared 2-core machine, so the
// pair of runs is measured up to three times and must hold the bound once; a scheduler
// that lets the heavy tenant take every slot makes the light tenant wait for a slow
// attempt (20 ms) in every run, and fails all three.
func TestTenantFairness(t *testing.T) {
	var bound time.Duration
	for try := 1; try <= 3; try++ {
		// Each loaded run is held to a solo run taken just before it, so a slow spell of the shared machine
		// weighs on both sides of the comparison instead of on the loaded side alone.
		solo, _ := fairnessRun(t, false)
		bound = 2 * max(solo, 5*time.Millisecond)
		loaded, n := fairnessRun(t, true)
		t.Logf("tenant B p99 delivery lag: solo %v, behind 99:1 load on a slow sink %v (%d hooks, run %d)", solo, loaded, n, try)
		if loaded <= bound {
			return
		}
	}
	t.Fatalf("light tenant p99 under load exceeded 2x its solo p99 (last bound %v) in three runs", bound)
}

// BenchmarkTenantFairness prints both figures of the fairness run for `make bench`.
func BenchmarkTenantFairness(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if i > 0 {
			break
		}
		solo, _ := fairnessRun(b, false)
		loaded, _ := fairnessRun(b, true)
		b.Logf("tenant B p99 delivery lag: solo %v, behind 99:1 load on a slow sink %v", solo, loaded)
		b.ReportMetric(float64(solo)/1e6, "solo_p99_ms")
		b.ReportMetric(float64(loaded)/1e6, "loaded_p99_ms")
		b.ReportMetric(float64(loaded)/float64(solo), "ratio")
	}
}
