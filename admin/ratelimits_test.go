package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
)

const acmeLimiter = "acme-limiter" // rate_limits:write on tenant acme only

// startRates starts an edge and dispatch instance named name in dir (so a second start is a restart), whose
// tenant acme is limited to 2 hooks by its config entry (rate 0.01/s: the bucket does not refill in a test).
func startRates(t *testing.T, name, dir string) *instance.Instance {
	t.Helper()
	return startAdmin(t, name, func(cfg *config.Config) {
		cfg.Node.DataDir = dir
		cfg.RateLimits.Tenants = map[string]config.TenantLimits{"acme": {Rate: 0.01, Burst: 2}}
		cfg.Admin.Principals = append(testPrincipals(), config.Principal{Name: "acmelimiter",
			TokenSHA256: hashOf(acmeLimiter), Scopes: []string{"rate_limits:write"}, Tenants: []string{"acme"}})
	})
}

// Inventory A.5: GET/PUT/DELETE /v1/tenants/{tenant}/rate-limit and GET /v1/rate-limits, with the auth and
// tenant rules, 400 invalid_rate_limit naming the field, 404 for an absent override, and one audit row per
// change (none for a no-op).
func TestRateLimitOverrideRoutes(t *testing.T) {
	inst := startRates(t, "rlroutes", t.TempDir())
	base := "http://" + inst.AdminAddr()
	rl := base + "/v1/tenants/acme/rate-limit"
	raw := func(method, url, token, body string) answer {
		t.Helper()
		return call(t, method, url, token, json.RawMessage(body))
	}
	good := `{"rate":5,"burst":10}`
	call(t, "GET", rl, "", nil).want(t, "no token", http.StatusUnauthorized, "unauthorized")
	raw("PUT", rl, "", good).want(t, "put no token", http.StatusUnauthorized, "unauthorized")
	raw("PUT", rl, readerToken, good).want(t, "no rate_limits scope", http.StatusForbidden, "forbidden")
	call(t, "DELETE", rl, scraperTok, nil).want(t, "delete no scope", http.StatusForbidden, "forbidden")
	raw("PUT", base+"/v1/tenants/other/rate-limit", acmeLimiter, good).want(t, "other tenant", http.StatusForbidden, "forbidden")
	call(t, "GET", base+"/v1/tenants/a.b/rate-limit", opsToken, nil).want(t, "bad tenant", http.StatusBadRequest, "invalid_tenant")
	for body, field := range map[string]string{
		`{"rate":5}`:                 "burst",
		`{"burst":5}`:                "rate",
		`{"rate":0,"burst":5}`:       "rate",
		`{"rate":-1,"burst":5}`:      "rate",
		`{"rate":5,"burst":0.5}`:     "burst",
		`{"rate":5,"burst":5,"x":1}`: "body",
		`[1]`:                        "body",
		`{"rate":"5","burst":5}`:     "body",
	} {
		a := raw("PUT", rl, opsToken, body)
		a.want(t, "PUT "+body, http.StatusBadRequest, "invalid_rate_limit")
		if a.body["field"] != field {
			t.Fatalf("PUT %s: field %v, want %s", body, a.body["field"], field)
		}
	}
	call(t, "DELETE", rl, opsToken, nil).want(t, "delete absent", http.StatusNotFound, "not_found")
	if len(auditRows(t, base, opsToken, "?subject=rate_limit:acme")) != 0 {
		t.Fatal("a refused change wrote an audit row")
	}

	g := call(t, "GET", rl, acmeLimiter, nil)
	g.want(t, "get config", http.StatusOK, "")
	if g.body["source"] != "config" || g.body["rate"] != 0.01 || g.body["burst"] != 2.0 {
		t.Fatalf("config limit: %v", g.body)
	}
	a := raw("PUT", rl, acmeLimiter, good)
	a.want(t, "create", http.StatusOK, "")
	if a.body["source"] != "override" || a.body["rate"] != 5.0 || a.body["audit_seq"] == nil {
		t.Fatalf("created %v", a.body)
	}
	if a = raw("PUT", rl, opsToken, ` {"burst":10, "rate":5.0}`); a.status != http.StatusOK || a.body["audit_seq"] != nil {
		t.Fatalf("same override again: %d %v (no audit row expected)", a.status, a.body)
	}
	raw("PUT", rl, opsToken, `{"rate":1,"burst":3}`).want(t, "update", http.StatusOK, "")
	g = call(t, "GET", rl, opsToken, nil)
	if g.body["source"] != "override" || g.body["rate"] != 1.0 || g.body["burst"] != 3.0 {
		t.Fatalf("override: %v", g.body)
	}
	raw("PUT", base+"/v1/tenants/beta/rate-limit", opsToken, good).want(t, "beta", http.StatusOK, "")
	l := call(t, "GET", base+"/v1/rate-limits", acmeLimiter, nil)
	l.want(t, "list", http.StatusOK, "")
	if ts := l.body["tenants"].([]any); len(ts) != 1 || ts[0].(map[string]any)["tenant"] != "acme" || l.body["default"] != nil {
		t.Fatalf("tenant-scoped list: %v", l.body)
	}
	l = call(t, "GET", base+"/v1/rate-limits", opsToken, nil)
	if ts := l.body["tenants"].([]any); len(ts) != 2 || ts[1].(map[string]any)["tenant"] != "beta" {
		t.Fatalf("list: %v", l.body)
	}
	call(t, "DELETE", rl, acmeLimiter, nil).want(t, "delete", http.StatusNoContent, "")
	if g = call(t, "GET", rl, opsToken, nil); g.body["source"] != "config" {
		t.Fatalf("after delete: %v", g.body)
	}
	if g = call(t, "GET", base+"/v1/tenants/gamma/rate-limit", opsToken, nil); g.body["source"] != "none" || g.body["rate"] != nil {
		t.Fatalf("no limit: %v", g.body)
	}
	var actions []string
	for _, r := range auditRows(t, base, opsToken, "?subject=rate_limit:acme") {
		actions = append(actions, r["action"].(string)+"@"+r["actor"].(string))
		if r["tenant_id"] != "acme" || r["before_hash"] == r["after_hash"] {
			t.Fatalf("row %v", r)
		}
	}
	if strings.Join(actions, ",") != "rate_limit.create@acmelimiter,rate_limit.update@ops,rate_limit.delete@acmelimiter" {
		t.Fatalf("audit of acme's override: %v", actions)
	}
}

// burstOf posts hooks to the sample source (tenant acme) until one is refused 429, and returns how many
// were accepted (at most max+1 tried).
func burstOf(t *testing.T, addr string, max int) int {
	t.Helper()
	for n := 0; n <= max; n++ {
		switch got := ingest(t, addr, "/webhooks/sample"); got {
		case http.StatusCreated:
		case http.StatusTooManyRequests:
			return n
		default:
			t.Fatalf("hook %d: %d", n+1, got)
		}
	}
	return max + 1
}

// Inventory A.5: an override "persisted in store; resets bucket" and B.3 "runtime override > tenant entry >
// default": it changes what a tenant gets at the edge at once, without a restart, and a restart keeps it.
func TestRateLimitOverrideAppliesLiveAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	inst := startRates(t, "rllive", dir)
	base, in := "http://"+inst.AdminAddr(), inst.IngestAddr()
	rl := base + "/v1/tenants/acme/rate-limit"
	if n := burstOf(t, in, 10); n != 2 {
		t.Fatalf("config entry: %d hooks before 429, want 2", n)
	}
	call(t, "PUT", rl, opsToken, map[string]any{"rate": 0.01, "burst": 5}).want(t, "raise", http.StatusOK, "")
	n := burstOf(t, in, 10)
	t.Logf("override burst 5: %d hooks accepted before 429", n)
	if n != 5 {
		t.Fatalf("raised override: %d hooks before 429, want 5", n)
	}
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	inst = startRates(t, "rllive", dir)
	base, in = "http://"+inst.AdminAddr(), inst.IngestAddr()
	rl = base + "/v1/tenants/acme/rate-limit"
	// The boot loads the override when the store opens, before ingest opens.
	if g := call(t, "GET", rl, opsToken, nil); g.body["source"] != "override" || g.body["burst"] != 5.0 {
		t.Fatalf("after restart: %v", g.body)
	}
	n = burstOf(t, in, 10)
	t.Logf("after restart: %d hooks accepted before 429", n)
	if n != 5 {
		t.Fatalf("override after restart: %d hooks before 429, want 5", n)
	}
	call(t, "PUT", rl, opsToken, map[string]any{"rate": 0.01, "burst": 1}).want(t, "lower", http.StatusOK, "")
	if n = burstOf(t, in, 10); n != 1 {
		t.Fatalf("lowered override: %d hooks before 429, want 1", n)
	}
	call(t, "DELETE", rl, opsToken, nil).want(t, "delete", http.StatusNoContent, "")
	if n = burstOf(t, in, 10); n != 2 {
		t.Fatalf("override removed: %d hooks before 429, want 2 (the config entry)", n)
	}
}
