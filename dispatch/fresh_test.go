package dispatch_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Hooks arriving while dispatch has no backlog are claimed by their commit (store/fresh.go) and delivered
// from there: each exactly as ingested, each once, and nothing is left in the store.
func TestFreshClaimsAreDelivered(t *testing.T) {
	srv := newSinkServer(t, nil)
	inst := start(t, map[string]config.Source{"s": httpSource("acme", srv.URL, false)}, nil)
	const n = 40
	sent := map[string]string{}
	for i := range n {
		body := fmt.Sprintf(`{"n":%d}`, i)
		sent[ingest(t, inst, "/webhooks/s", []byte(body))] = body
	}
	poll.True(t, 10*time.Second, "every hook at the sink", func() bool { return len(srv.delivered()) >= n })
	for _, r := range srv.delivered() {
		if sent[r.id] != string(r.body) || srv.hitsOf(r.id) != 1 {
			t.Fatalf("delivery %+v (hit %d times) does not match what was ingested", r, srv.hitsOf(r.id))
		}
	}
	got := inst.Store().FreshTaken()
	if got == 0 {
		t.Fatalf("no row was claimed by its commit (%d hooks, one at a time, no backlog)", n)
	}
	if m := testutil.ToFloat64(inst.Telemetry().Metrics.Dispatch.FreshClaims); m != float64(got) {
		t.Fatalf("ankusa_dispatch_fresh_claims_total %v, the store claimed %d fresh", m, got)
	}
	poll.True(t, 5*time.Second, "rows settled", func() bool {
		c := counts(inst)
		return c.Pending+c.Scheduled+c.Inflight+c.Dead == 0
	})
}

// A tenant with a window of its own is never claimed fresh, so its window bounds its claimed rows exactly; a
// tenant without one is claimed fresh beside it.
func TestFreshClaimsKeepTenantWindows(t *testing.T) {
	var mu sync.Mutex
	running, most := 0, 0
	srv := newSinkServer(t, func(r received, _ int) (int, http.Header, time.Duration) {
		if r.tenant == "windowed" {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
		}
		return 200, nil, 0
	})
	inst := start(t, map[string]config.Source{
		"w": httpSource("windowed", srv.URL, false),
		"f": httpSource("free", srv.URL, false),
	}, func(cfg *config.Config) {
		cfg.Dispatch.Tenants = map[string]config.TenantWindow{"windowed": {MaxInflight: 2}}
	})
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := tryIngest(inst, "/webhooks/w", fmt.Appendf(nil, `{"n":%d}`, i)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := inst.Store().FreshTaken(); got != 0 {
		t.Fatalf("%d rows of the windowed tenant were claimed fresh", got)
	}
	for i := range 5 {
		ingest(t, inst, "/webhooks/f", fmt.Appendf(nil, `{"free":%d}`, i))
	}
	poll.True(t, 10*time.Second, "every hook at the sink", func() bool { return len(srv.delivered()) >= n+5 })
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Fatalf("the windowed tenant had %d deliveries at once, its window is 2", most)
	}
	if inst.Store().FreshTaken() == 0 {
		t.Fatal("the tenant without a window was never claimed fresh")
	}
}
