package admin_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/fixture"
)

// auditRows reads GET /v1/audit with token and returns its entries.
func auditRows(t *testing.T, base, token, query string) []map[string]any {
	t.Helper()
	a := call(t, "GET", base+"/v1/audit"+query, token, nil)
	a.want(t, "audit "+query, http.StatusOK, "")
	var out []map[string]any
	for _, e := range a.body["entries"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// Seed, Audit trail: a change leaves one row (actor, client, request id, keyed hashes, revision); a request
// that changes nothing writes none; GET /v1/audit needs audit:read and pages in commit order.
func TestAuditRowsOfLogLevelChanges(t *testing.T) {
	inst := startAdmin(t, "audit", nil)
	base := "http://" + inst.AdminAddr()
	call(t, "GET", base+"/v1/audit", "", nil).want(t, "no token", http.StatusUnauthorized, "unauthorized")
	call(t, "GET", base+"/v1/audit", readerToken, nil).want(t, "no audit:read", http.StatusForbidden, "forbidden")
	call(t, "GET", base+"/v1/audit?limit=x", opsToken, nil).want(t, "bad limit", http.StatusBadRequest, "invalid_filter")
	call(t, "GET", base+"/v1/audit?cursor=x", opsToken, nil).want(t, "bad cursor", http.StatusBadRequest, "invalid_filter")
	call(t, "GET", base+"/v1/audit?tenant_id=a.b", opsToken, nil).want(t, "bad tenant", http.StatusBadRequest, "invalid_tenant")

	lvl := base + "/v1/log-level"
	call(t, "PUT", lvl, opsToken, map[string]any{"level": "debug"}).want(t, "debug", http.StatusOK, "")
	call(t, "PUT", lvl, opsToken, map[string]any{"level": "debug"}).want(t, "debug again", http.StatusOK, "")
	call(t, "PUT", lvl, opsToken, map[string]any{"level": "info"}).want(t, "info", http.StatusOK, "")
	rows := auditRows(t, base, opsToken, "")
	if len(rows) != 2 {
		t.Fatalf("%d rows for two changes and a no-op: %v", len(rows), rows)
	}
	r0, r1 := rows[0], rows[1]
	if r0["actor"] != "ops" || r0["action"] != "log_level.set" || r0["subject"] != "log_level" ||
		r0["status"] != "ok" || r0["revision"] != 1.0 || r1["revision"] != 2.0 || r0["request_id"] == "" ||
		!strings.HasPrefix(r0["client"].(string), "127.0.0.1:") || r0["seq"].(float64) >= r1["seq"].(float64) {
		t.Fatalf("rows %v", rows)
	}
	if r1["before_hash"] != r0["after_hash"] || r0["before_hash"] == r0["after_hash"] || len(r0["after_hash"].(string)) != 64 {
		t.Fatalf("hashes: %v", rows)
	}
	// Paging: a full page names its cursor; the next page starts after it.
	a := call(t, "GET", base+"/v1/audit?limit=1", opsToken, nil)
	cur, _ := a.body["next_cursor"].(string)
	if cur == "" {
		t.Fatalf("a full page has no next_cursor: %v", a.body)
	}
	if next := auditRows(t, base, opsToken, "?cursor="+cur); len(next) != 1 || next[0]["seq"] != r1["seq"] {
		t.Fatalf("page after %s: %v", cur, next)
	}
	// The caller's request id is kept.
	req, _ := http.NewRequest("PUT", lvl, strings.NewReader(`{"level":"error"}`))
	req.Header.Set("Authorization", "Bearer "+opsToken)
	req.Header.Set("X-Request-Id", "req-42")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rows := auditRows(t, base, opsToken, "?after="+strings.TrimSuffix(cur, "")); rows[len(rows)-1]["request_id"] != "req-42" {
		t.Fatalf("request id not kept: %v", rows)
	}
}

// A tenant-scoped reader sees only its tenants' rows; a change of no tenant (the log level) is not its.
func TestAuditIsTenantFiltered(t *testing.T) {
	const acmeAuditor = "acme-auditor"
	inst := startAdmin(t, "auditten", func(cfg *config.Config) {
		cfg.Admin.Principals = append(testPrincipals(), config.Principal{Name: "auditor",
			TokenSHA256: hashOf(acmeAuditor), Scopes: []string{"audit:read"}, Tenants: []string{"acme"}})
	})
	base := "http://" + inst.AdminAddr()
	call(t, "PUT", base+"/v1/log-level", opsToken, map[string]any{"level": "debug"}).want(t, "debug", http.StatusOK, "")
	if rows := auditRows(t, base, acmeAuditor, ""); len(rows) != 0 {
		t.Fatalf("a tenant reader sees a global row: %v", rows)
	}
	if rows := auditRows(t, base, opsToken, ""); len(rows) != 1 {
		t.Fatalf("ops sees %d rows", len(rows))
	}
	call(t, "GET", base+"/v1/audit?tenant_id=other", acmeAuditor, nil).want(t, "other tenant", http.StatusForbidden, "forbidden")
	if rows := auditRows(t, base, acmeAuditor, "?tenant_id=acme"); len(rows) != 0 {
		t.Fatalf("acme rows: %v", rows)
	}
}

// Seed: "a change whose row cannot be written is not made (503)" — the runtime log level stays.
func TestChangeRefusedWhenAuditRowCannotBeWritten(t *testing.T) {
	var fail atomic.Bool
	inst := fixture.Instance(t, "auditfail", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge", "dispatch"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("acme", 1)}
		cfg.Admin.Principals = testPrincipals()
	}, &store.Faults{BeforeAudit: func() error {
		if fail.Load() {
			return errors.New("IO error: injected")
		}
		return nil
	}})
	base := "http://" + inst.AdminAddr()
	call(t, "PUT", base+"/v1/log-level", opsToken, map[string]any{"level": "debug"}).want(t, "debug", http.StatusOK, "")
	fail.Store(true)
	a := call(t, "PUT", base+"/v1/log-level", opsToken, map[string]any{"level": "error"})
	a.want(t, "row refused", http.StatusServiceUnavailable, "store_unavailable")
	if a.header.Get("Retry-After") != "1" {
		t.Fatalf("503 without Retry-After: %v", a.header)
	}
	call(t, "POST", base+"/v1/replays", opsToken, map[string]any{"kind": "dlq"}).want(t, "replay refused",
		http.StatusServiceUnavailable, "store_unavailable")
	fail.Store(false)
	// The level is still debug: setting debug again is a no-op and writes no row.
	call(t, "PUT", base+"/v1/log-level", opsToken, map[string]any{"level": "debug"}).want(t, "debug", http.StatusOK, "")
	if rows := auditRows(t, base, opsToken, ""); len(rows) != 1 {
		t.Fatalf("%d rows, want the first change's only: %v", len(rows), rows)
	}
	if a := call(t, "GET", base+"/v1/replays", opsToken, nil); len(a.body["jobs"].([]any)) != 0 {
		t.Fatalf("a replay was created without its row: %v", a.body)
	}
}
