package edge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/test/services"
)

// fleetNode starts one node of a fleet whose store is at addr, under prefix (unique per test, so tests
// sharing the machine's Redis never see each other's keys).
func fleetNode(t *testing.T, addr, prefix string, mutate func(*config.Config), faults *store.Faults) *instance.Instance {
	t.Helper()
	return start(t, func(c *config.Config) {
		c.Sources["gh"] = dedupeSource()
		c.Fleet.Store.Addr, c.Fleet.Store.KeyPrefix = addr, prefix
		c.Fleet.TimeoutMS = 200
		if mutate != nil {
			mutate(c)
		}
	}, faults)
}

func fleetPrefix() string { return "ankusa-test:" + uuid.NewString() + ":" }

// Design, Fleet scope: "The tenant quota and the provider event key are counted in fleet.store (Redis), one
// call per hook, so N nodes enforce one limit and one dedupe window."
func TestFleetNodesShareOneLimitAndOneDedupeWindow(t *testing.T) {
	services.Require(t, "Redis", services.RedisAddr)
	prefix := fleetPrefix()
	both := func(c *config.Config) {
		c.RateLimits.Scope, c.Dedupe.Scope = config.ScopeFleet, config.ScopeFleet
		// Five hooks, refilling one per 100 s: the test never sees a refill.
		c.RateLimits.Default = &config.Rate{Rate: 0.01, Burst: 5}
	}
	a := fleetNode(t, services.RedisAddr, prefix, both, nil)
	b := fleetNode(t, services.RedisAddr, prefix, both, nil)

	accepted, limited := 0, 0
	for i := range 10 {
		node := a
		if i%2 == 1 {
			node = b
		}
		r := postBody(t, node, "/webhooks/sample", fmt.Appendf(nil, `{"n":%d}`, i))
		switch r.status {
		case 201:
			accepted++
		case 429:
			r.expect(t, 429, "rate_limited")
			limited++
		default:
			t.Fatalf("hook %d: %d %s", i, r.status, r.raw)
		}
	}
	t.Logf("two nodes, one fleet bucket of 5: %d accepted, %d rate_limited", accepted, limited)
	if accepted != 5 || limited != 5 {
		t.Fatalf("%d accepted and %d limited over two nodes sharing a burst of 5", accepted, limited)
	}

	// One dedupe window: an event committed on a is a duplicate on b, answered with a's id.
	prefixB := fleetPrefix()
	dd := func(c *config.Config) { c.Dedupe.Scope = config.ScopeFleet }
	a2 := fleetNode(t, services.RedisAddr, prefixB, dd, nil)
	b2 := fleetNode(t, services.RedisAddr, prefixB, dd, nil)
	first := postBody(t, a2, "/webhooks/gh", []byte(`{"n":1}`), "X-GitHub-Delivery", "fleet-1")
	first.expect(t, 201, "")
	again := postBody(t, b2, "/webhooks/gh", []byte(`{"n":1}`), "X-GitHub-Delivery", "fleet-1")
	again.expect(t, 201, "")
	if again.body["duplicate"] != true || again.body["id"] != first.body["id"] {
		t.Fatalf("b answered %s for an event a committed as %s", again.raw, first.raw)
	}
	if n := len(hooks(t, b2)); n != 0 {
		t.Fatalf("b stored %d hooks for a duplicate", n)
	}
	t.Logf("event fleet-1: a %s, b %s", first.raw, again.raw)
}

// Design: "another node meeting a committed key answers 201 with the first hook's id, meeting a pending one
// 409 dedupe_pending …, and a failed commit releases the claim."
func TestFleetDedupeClaimIsTwoPhase(t *testing.T) {
	services.Require(t, "Redis", services.RedisAddr)
	prefix := fleetPrefix()
	dd := func(c *config.Config) { c.Dedupe.Scope = config.ScopeFleet }
	h := newHold()
	a := fleetNode(t, services.RedisAddr, prefix, dd, h.faults())
	b := fleetNode(t, services.RedisAddr, prefix, dd, nil)

	held := make(chan reply, 1)
	go func() { held <- send(a, "/webhooks/gh", []byte(`{"n":1}`), "X-GitHub-Delivery", "two-phase") }()
	poll.True(t, 10*time.Second, "a's commit to be held", func() bool { return h.entered.Load() > 0 })
	pending := postBody(t, b, "/webhooks/gh", []byte(`{"n":1}`), "X-GitHub-Delivery", "two-phase")
	pending.expect(t, 409, "dedupe_pending")
	t.Logf("while a's commit is held, b answers %d %s", pending.status, pending.raw)
	close(h.gate)
	first := <-held
	first.expect(t, 201, "")
	poll.True(t, 5*time.Second, "b to see the committed claim", func() bool {
		r := send(b, "/webhooks/gh", []byte(`{"n":1}`), "X-GitHub-Delivery", "two-phase")
		return r.status == 201 && r.body["duplicate"] == true && r.body["id"] == first.body["id"]
	})

	// A failed commit releases its claim: the provider's retry on another node is a new hook, not 409.
	h2 := newHold()
	h2.fail.Store(true)
	close(h2.gate)
	c := fleetNode(t, services.RedisAddr, prefix, dd, h2.faults())
	failed := postBody(t, c, "/webhooks/gh", []byte(`{"n":2}`), "X-GitHub-Delivery", "released")
	if failed.status != 503 {
		t.Fatalf("a failed commit answered %d %s", failed.status, failed.raw)
	}
	retry := postBody(t, b, "/webhooks/gh", []byte(`{"n":2}`), "X-GitHub-Delivery", "released")
	retry.expect(t, 201, "")
	if retry.body["duplicate"] == true {
		t.Fatalf("the retry of a failed commit answered duplicate: %s", retry.raw)
	}
	t.Logf("after a failed commit (%d %s) the retry on b is %s", failed.status, failed.raw, retry.raw)
}

// Design: "a breaker takes a slow or dead store out of the path: the node then limits and dedupes alone and
// ankusa_fleet_limiter_degraded reads 1, never a 503."
func TestFleetStoreDownDegradesToNodeLimits(t *testing.T) {
	services.Require(t, "Redis", services.RedisAddr)
	proxy := sinktest.NewProxy(t, services.RedisAddr)
	node := fleetNode(t, proxy.Addr(), fleetPrefix(), func(c *config.Config) {
		c.RateLimits.Scope, c.Dedupe.Scope = config.ScopeFleet, config.ScopeFleet
		c.RateLimits.Tenants = map[string]config.TenantLimits{"default": {Rate: 0.01, Burst: 3}}
		gh := dedupeSource()
		gh.Tenant = "acme"
		c.Sources["gh"] = gh
		c.Fleet.BreakerFailures, c.Fleet.BreakerOpenMS = 2, 500
	}, nil)
	degraded := node.Telemetry().Metrics.Trust.FleetDegraded
	postBody(t, node, "/webhooks/sample", []byte(`{"up":true}`)).expect(t, 201, "")
	if v := testutil.ToFloat64(degraded); v != 0 {
		t.Fatalf("degraded %v with the store up", v)
	}

	proxy.Pause()
	statuses := map[int]int{}
	for i := range 6 {
		r := postBody(t, node, "/webhooks/sample", fmt.Appendf(nil, `{"down":%d}`, i))
		statuses[r.status]++
		if r.status == 503 {
			t.Fatalf("hook %d answered 503 with the fleet store down: %s", i, r.raw)
		}
		if r.status == 429 {
			r.expect(t, 429, "rate_limited")
		}
	}
	// The fleet bucket took one; the node's own bucket of 3 starts full.
	if statuses[201] != 3 || statuses[429] != 3 {
		t.Fatalf("answers with the store down %v, want the node's own burst of 3 then rate_limited", statuses)
	}
	if v := testutil.ToFloat64(degraded); v != 1 {
		t.Fatalf("ankusa_fleet_limiter_degraded %v with the store down", v)
	}
	dup1 := postBody(t, node, "/webhooks/gh", []byte(`{}`), "X-GitHub-Delivery", "down-1")
	dup2 := postBody(t, node, "/webhooks/gh", []byte(`{}`), "X-GitHub-Delivery", "down-1")
	dup1.expect(t, 201, "")
	if dup2.status != 201 || dup2.body["duplicate"] != true || dup2.body["id"] != dup1.body["id"] {
		t.Fatalf("the node's own dedupe did not hold while degraded: %s then %s", dup1.raw, dup2.raw)
	}
	t.Logf("store down: answers %v, degraded=%v, dedupe %s then %s", statuses, testutil.ToFloat64(degraded), dup1.raw, dup2.raw)

	// The store back, the breaker's probe closes it.
	proxy.Resume()
	poll.True(t, 10*time.Second, "the breaker to close", func() bool {
		send(node, "/webhooks/gh", []byte(`{}`), "X-GitHub-Delivery", uuid.NewString())
		return testutil.ToFloat64(degraded) == 0
	})
}
