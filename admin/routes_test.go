package admin_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/ankusa-go/ankusa/config"
)

const (
	acmeRoutes = "acme-routes" // routes:write on tenant acme only
	acmeReader = "acme-reader" // routes:read on tenant acme only
)

func startRoutes(t *testing.T, name string, mutate func(*config.Config)) string {
	t.Helper()
	inst := startAdmin(t, name, func(cfg *config.Config) {
		cfg.Admin.Principals = append(testPrincipals(),
			config.Principal{Name: "acmeroutes", TokenSHA256: hashOf(acmeRoutes), Scopes: []string{"routes:write"}, Tenants: []string{"acme"}},
			config.Principal{Name: "acmereader", TokenSHA256: hashOf(acmeReader), Scopes: []string{"routes:read"}, Tenants: []string{"acme"}})
		cfg.Routes.MaxRoutes = 5
		if mutate != nil {
			mutate(cfg)
		}
	})
	return "http://" + inst.AdminAddr()
}

func rawCall(t *testing.T, method, url, token, body string) answer {
	t.Helper()
	if body == "" {
		return call(t, method, url, token, nil)
	}
	return call(t, method, url, token, json.RawMessage(body))
}

// Inventory A.6 (route-management API) served on the authenticated admin listener: CRUD, the limit, the
// conflicts, the immutable fields, the audit rows and their absence for a no-op.
func TestRoutesCRUD(t *testing.T) {
	base := startRoutes(t, "routescrud", nil)
	rs := base + "/v1/routes"
	call(t, "GET", rs, "", nil).want(t, "no token", http.StatusUnauthorized, "unauthorized")
	call(t, "GET", rs, scraperTok, nil).want(t, "no routes scope", http.StatusForbidden, "forbidden")
	rawCall(t, "POST", rs, readerToken, `{"id":"a","path":"/a"}`).want(t, "config:read cannot write", http.StatusForbidden, "forbidden")
	call(t, "GET", rs, readerToken, nil).want(t, "config:read reads", http.StatusOK, "")

	a := rawCall(t, "POST", rs, opsToken, `{"id":"gh","path":"/webhooks/%2F"}`)
	a.want(t, "encoded slash", http.StatusBadRequest, "invalid_route")
	if a.body["field"] != "path" {
		t.Fatalf("field %v", a.body)
	}
	a = rawCall(t, "POST", rs, opsToken, `{"id":"gh","path":"/x","ip_rules":{"default":"allow","rules":[{"action":"deny","cidr":"::ffff:0:0/96"}]}}`)
	a.want(t, "mapped CIDR", http.StatusBadRequest, "invalid_route")
	if a.body["field"] != "ip_rules.rules[0].cidr" {
		t.Fatalf("field %v", a.body)
	}
	rawCall(t, "POST", rs, opsToken, `{"id":"gh","path":"/x","revision":3}`).want(t, "unknown field", http.StatusBadRequest, "invalid_filter")

	a = rawCall(t, "POST", rs, opsToken, `{"id":"gh","path":"/webhooks/:source","metadata":{"team":"payments"}}`)
	a.want(t, "create", http.StatusCreated, "")
	if a.body["revision"] != 1.0 || a.body["audit_seq"] == nil || a.body["methods"].([]any)[0] != "POST" || a.body["enabled"] != true {
		t.Fatalf("created %v", a.body)
	}
	rawCall(t, "POST", rs, opsToken, `{"id":"gh","path":"/other"}`).want(t, "id taken", http.StatusConflict, "route_exists")
	a = rawCall(t, "POST", rs, opsToken, `{"id":"gh2","path":"/webhooks/:name"}`)
	a.want(t, "same shape and method", http.StatusConflict, "route_conflict")
	if a.body["method"] != "POST" || a.body["route_id"] != "gh" {
		t.Fatalf("conflict body %v", a.body)
	}
	call(t, "GET", rs+"/gh", opsToken, nil).want(t, "get", http.StatusOK, "")
	call(t, "GET", rs+"/nope", opsToken, nil).want(t, "get absent", http.StatusNotFound, "route_not_found")
	call(t, "GET", rs+"/Bad", opsToken, nil).want(t, "bad id", http.StatusBadRequest, "invalid_route")

	// PUT: the same spec is 200 with no row; a change is 200 with one; a new id 201.
	a = rawCall(t, "PUT", rs+"/gh", opsToken, `{"path":"/webhooks/:source","metadata":{"team":"payments"}}`)
	a.want(t, "no-op put", http.StatusOK, "")
	if a.body["audit_seq"] != nil || a.body["revision"] != 1.0 {
		t.Fatalf("no-op put wrote a row: %v", a.body)
	}
	a = rawCall(t, "PUT", rs+"/gh", opsToken, `{"path":"/webhooks/:source","methods":["POST","PUT"]}`)
	if a.want(t, "put", http.StatusOK, ""); a.body["revision"] != 2.0 || a.body["audit_seq"] == nil {
		t.Fatalf("put %v", a.body)
	}
	rawCall(t, "PUT", rs+"/gh", opsToken, `{"id":"other","path":"/x"}`).want(t, "id mismatch", http.StatusBadRequest, "invalid_route")
	rawCall(t, "PUT", rs+"/fresh", opsToken, `{"path":"/fresh"}`).want(t, "put creates", http.StatusCreated, "")

	// PATCH: id and path are immutable; a field changes alone.
	a = rawCall(t, "PATCH", rs+"/gh", opsToken, `{"path":"/elsewhere"}`)
	if a.want(t, "patch path", http.StatusBadRequest, "invalid_route"); a.body["field"] != "path" {
		t.Fatalf("patch path %v", a.body)
	}
	a = rawCall(t, "PATCH", rs+"/gh", opsToken, `{"enabled":false,"path":"/webhooks/:source"}`)
	if a.want(t, "patch", http.StatusOK, ""); a.body["enabled"] != false || a.body["revision"] != 3.0 {
		t.Fatalf("patch %v", a.body)
	}
	rawCall(t, "PATCH", rs+"/nope", opsToken, `{"enabled":true}`).want(t, "patch absent", http.StatusNotFound, "route_not_found")
	rawCall(t, "PATCH", rs+"/gh", opsToken, `{"colour":"red"}`).want(t, "patch unknown field", http.StatusBadRequest, "invalid_route")
	// With gh disabled its twin may be created (and enabling gh again then conflicts).
	rawCall(t, "POST", rs, opsToken, `{"id":"gh2","path":"/webhooks/:name"}`).want(t, "twin of a disabled route", http.StatusCreated, "")
	rawCall(t, "PATCH", rs+"/gh", opsToken, `{"enabled":true}`).want(t, "enable into a conflict", http.StatusConflict, "route_conflict")

	// routes.max_routes: 5 (gh, fresh, gh2 exist).
	rawCall(t, "POST", rs, opsToken, `{"id":"r4","path":"/r4"}`).want(t, "4th", http.StatusCreated, "")
	rawCall(t, "POST", rs, opsToken, `{"id":"r5","path":"/r5"}`).want(t, "5th", http.StatusCreated, "")
	a = rawCall(t, "POST", rs, opsToken, `{"id":"r6","path":"/r6"}`)
	if a.want(t, "past max_routes", http.StatusConflict, "route_limit"); a.body["limit"] != 5.0 {
		t.Fatalf("limit %v", a.body)
	}

	// Pages: id-ordered, with an opaque cursor; the enabled filter.
	a = call(t, "GET", rs+"?limit=2", opsToken, nil)
	page := a.body["routes"].([]any)
	if len(page) != 2 || page[0].(map[string]any)["id"] != "fresh" || page[1].(map[string]any)["id"] != "gh" || a.body["next_cursor"] == nil {
		t.Fatalf("page 1 %v", a.body)
	}
	a = call(t, "GET", rs+"?limit=10&cursor="+a.body["next_cursor"].(string), opsToken, nil)
	if page = a.body["routes"].([]any); len(page) != 3 || page[0].(map[string]any)["id"] != "gh2" || a.body["next_cursor"] != nil {
		t.Fatalf("page 2 %v", a.body)
	}
	if page = call(t, "GET", rs+"?enabled=false", opsToken, nil).body["routes"].([]any); len(page) != 1 {
		t.Fatalf("enabled=false %v", page)
	}
	call(t, "GET", rs+"?enabled=maybe", opsToken, nil).want(t, "bad filter", http.StatusBadRequest, "invalid_filter")
	call(t, "GET", rs+"?cursor=!!", opsToken, nil).want(t, "bad cursor", http.StatusBadRequest, "invalid_filter")

	call(t, "DELETE", rs+"/r5", opsToken, nil).want(t, "delete", http.StatusNoContent, "")
	call(t, "DELETE", rs+"/r5", opsToken, nil).want(t, "delete again", http.StatusNotFound, "route_not_found")

	// One audit row per change of gh: create, put, patch (the no-op put and the refused changes wrote none).
	a = call(t, "GET", base+"/v1/audit?subject=route:gh", opsToken, nil)
	entries := a.body["entries"].([]any)
	want := []string{"route.create", "route.update", "route.update"}
	if len(entries) != len(want) {
		t.Fatalf("audit rows of route:gh %v", entries)
	}
	for i, e := range entries {
		if e.(map[string]any)["action"] != want[i] || e.(map[string]any)["revision"] != float64(i+1) {
			t.Fatalf("row %d %v", i, e)
		}
	}
}

// A route with a tenant is a tenant principal's to see and change; a node route (no tenant), the global rules
// and the dry run need every tenant.
func TestRoutesTenantRule(t *testing.T) {
	base := startRoutes(t, "routestenant", nil)
	rs := base + "/v1/routes"
	rawCall(t, "POST", rs, acmeRoutes, `{"id":"node","path":"/node"}`).want(t, "node route by a tenant principal", http.StatusForbidden, "forbidden")
	rawCall(t, "POST", rs, acmeRoutes, `{"id":"globex","path":"/globex","tenant":"globex"}`).want(t, "other tenant", http.StatusForbidden, "forbidden")
	rawCall(t, "POST", rs, acmeRoutes, `{"id":"acme","path":"/acme","tenant":"acme"}`).want(t, "own tenant", http.StatusCreated, "")
	rawCall(t, "POST", rs, opsToken, `{"id":"node","path":"/node"}`).want(t, "node route", http.StatusCreated, "")
	a := call(t, "GET", rs, acmeReader, nil)
	if list := a.body["routes"].([]any); len(list) != 1 || list[0].(map[string]any)["id"] != "acme" {
		t.Fatalf("a tenant reader sees %v", a.body)
	}
	call(t, "GET", rs+"/node", acmeReader, nil).want(t, "node route hidden", http.StatusNotFound, "route_not_found")
	call(t, "DELETE", rs+"/node", acmeRoutes, nil).want(t, "node route not deletable", http.StatusNotFound, "route_not_found")
	rawCall(t, "PATCH", rs+"/acme", acmeRoutes, `{"tenant":"globex"}`).want(t, "move to another tenant", http.StatusForbidden, "forbidden")
	rawCall(t, "PUT", rs+"/node", acmeRoutes, `{"path":"/node","tenant":"acme"}`).want(t, "take a node route's id", http.StatusConflict, "route_exists")
	rawCall(t, "POST", rs+"/test", acmeReader, `{"method":"POST","path":"/acme","ip":"192.0.2.1"}`).want(t, "dry run needs every tenant", http.StatusForbidden, "forbidden")
	rawCall(t, "PUT", base+"/v1/ip-rules", acmeRoutes, `{"default":"deny","rules":[]}`).want(t, "global rules need every tenant", http.StatusForbidden, "forbidden")
	call(t, "GET", base+"/v1/ip-rules", acmeReader, nil).want(t, "global rules readable", http.StatusOK, "")
}

// Inventory A.6: "GET / PUT /admin/ip-rules: global rules; PUT requires both default and rules else 400
// invalid_ip_rules (names field)"; "POST /admin/routes/test: dry run {method, path, ip} → {decision, reason,
// route_id, ip_rule (+scope)}".
func TestIPRulesAndDryRun(t *testing.T) {
	base := startRoutes(t, "routesdry", func(cfg *config.Config) { cfg.Routes.IPDeniedStatus = 404 })
	ip := base + "/v1/ip-rules"
	a := call(t, "GET", ip, opsToken, nil)
	if a.want(t, "get", http.StatusOK, ""); a.body["default"] != "allow" || len(a.body["rules"].([]any)) != 0 {
		t.Fatalf("config rules %v", a.body)
	}
	for body, field := range map[string]string{
		`{"default":"deny"}`:             "rules",
		`{"rules":[]}`:                   "default",
		`{"default":"maybe","rules":[]}`: "default",
		`{"default":"deny","rules":[{"action":"deny","cidr":"::ffff:0:0/96"}]}`: "rules[0].cidr",
		`{"default":"deny","rules":[],"extra":1}`:                               "extra",
	} {
		a = rawCall(t, "PUT", ip, opsToken, body)
		if a.want(t, body, http.StatusBadRequest, "invalid_ip_rules"); a.body["field"] != field {
			t.Fatalf("%s: field %v, want %s", body, a.body["field"], field)
		}
	}
	rules := `{"default":"allow","rules":[{"action":"deny","cidr":"203.0.113.9/24"}]}`
	a = rawCall(t, "PUT", ip, opsToken, rules)
	if a.want(t, "put", http.StatusOK, ""); a.body["audit_seq"] == nil || a.body["rules"].([]any)[0].(map[string]any)["cidr"] != "203.0.113.0/24" {
		t.Fatalf("put %v", a.body)
	}
	if a = rawCall(t, "PUT", ip, opsToken, rules); a.body["audit_seq"] != nil {
		t.Fatalf("no-op put wrote a row: %v", a.body)
	}
	rawCall(t, "POST", base+"/v1/routes", opsToken, `{"id":"office","path":"/internal/*","ip_rules":{"default":"deny","rules":[{"action":"allow","cidr":"192.0.2.0/24"}]}}`).
		want(t, "create", http.StatusCreated, "")
	test := func(body string) map[string]any {
		t.Helper()
		a := rawCall(t, "POST", base+"/v1/routes/test", opsToken, body)
		a.want(t, body, http.StatusOK, "")
		return a.body
	}
	d := test(`{"method":"POST","path":"/internal/a/b","ip":"192.0.2.5"}`)
	if d["decision"] != "allow" || d["reason"] != "matched" || d["route_id"] != "office" ||
		d["ip_rule"].(map[string]any)["scope"] != "route" || d["ip_rule"].(map[string]any)["cidr"] != "192.0.2.0/24" {
		t.Fatalf("allowed %v", d)
	}
	d = test(`{"method":"POST","path":"/internal/a","ip":"198.51.100.1"}`)
	if d["decision"] != "reject" || d["reason"] != "ip_denied" || d["status"] != 404.0 || d["ip_rule"].(map[string]any)["action"] != "deny" {
		t.Fatalf("route deny %v", d)
	}
	d = test(`{"method":"POST","path":"/internal/a","ip":"203.0.113.7"}`)
	if d["reason"] != "ip_denied" || d["route_id"] != nil || d["ip_rule"].(map[string]any)["scope"] != "global" {
		t.Fatalf("global deny %v", d)
	}
	if d = test(`{"method":"GET","path":"/internal/a","ip":"192.0.2.5"}`); d["reason"] != "method" {
		t.Fatalf("method %v", d)
	}
	if d = test(`{"method":"POST","path":"/elsewhere","ip":"192.0.2.5"}`); d["reason"] != "no_route" || d["guard_enabled"] != false {
		t.Fatalf("no route %v", d)
	}
	rawCall(t, "POST", base+"/v1/routes/test", opsToken, `{"method":"POST","path":"/x","ip":"nope"}`).want(t, "bad ip", http.StatusBadRequest, "invalid_filter")
	rawCall(t, "POST", base+"/v1/routes/test", opsToken, `{"method":"POST","path":"x","ip":"192.0.2.1"}`).want(t, "bad path", http.StatusBadRequest, "invalid_filter")
}

// A node without the edge role has no route table: 409 role_not_enabled.
func TestRoutesNeedTheEdge(t *testing.T) {
	inst := startAdmin(t, "routesnoedge", func(cfg *config.Config) { cfg.Node.Roles = []string{"dispatch"} })
	a := call(t, "GET", "http://"+inst.AdminAddr()+"/v1/routes", opsToken, nil)
	if a.want(t, "no edge", http.StatusConflict, "role_not_enabled"); a.body["role"] != "edge" {
		t.Fatalf("%v", a.body)
	}
}
