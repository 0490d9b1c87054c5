package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// guardPost sends a POST with body through the ingest port (xff: an X-Forwarded-For value, "" none) and
// returns the status and the error code of the answer.
func guardPost(t *testing.T, n *node, path, xff string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, n.url(path), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// refusedUnread sends the head of a POST announcing a body of 10 MB and sends only what the server reads with
// a head (fasthttp's pre-read: min(max_body_bytes, 8 KiB) = 1000 bytes here), or, with expect, nothing at all
// (Expect: 100-continue). A guard that refuses before reading answers at once; one that read the body would
// wait for the rest of it and time out.
func refusedUnread(t *testing.T, n *node, path string, expect bool) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(n.url(""), "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	head := "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n"
	if expect {
		fmt.Fprint(conn, head+"Expect: 100-continue\r\n\r\n")
	} else {
		fmt.Fprint(conn, head+"\r\n"+strings.Repeat("x", 1000))
	}
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	return strings.TrimSpace(status)
}

// Inventory A.2 step 1 and K.6 ("Refuse before reading"): with routes.enabled the route guard answers 404
// not_found for a path no route has, and routes.ip_denied_status for a denied address, before the body is read
// (a body over max_body_bytes is 404, not 413); an allowed route's hook is stored (201). A route created
// through the admin API is in force at once, audited once (a no-op writes no row), published as
// io.ankusa.route.created, and still in force after a kill -9 and a restart on the same data dir.
func TestRouteGuardEndToEnd(t *testing.T) {
	rec := &ceRecorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	extra := `max_body_bytes: 1000
routes:
  enabled: true
  trusted_proxies: [127.0.0.1]
  ip_rules: {default: allow, rules: [{action: deny, cidr: 203.0.113.0/24}]}
  seed:
    - {id: seeded, path: /webhooks/sample, ip_rules: {default: allow, rules: [{action: deny, cidr: 198.51.100.0/24}]}}
lifecycle:
  sinks:
    - type: http
      url: ` + srv.URL + `/events
`
	dir := t.TempDir()
	n := startAdminNodeWith(t, "routeguard", dir, extra)
	small := []byte(`{"a":1}`)
	big := bytes.Repeat([]byte("x"), 5000)

	// No route: 404 not_found, even for a body over max_body_bytes (the guard comes before the 413), and
	// before a byte of the body is sent.
	if status, body := guardPost(t, n, "/webhooks/other", "", big); status != http.StatusNotFound || body["error"] != "not_found" {
		t.Fatalf("unknown path with a large body: %d %v", status, body)
	}
	for _, expect := range []bool{false, true} {
		if line := refusedUnread(t, n, "/webhooks/other", expect); !strings.HasPrefix(line, "HTTP/1.1 404") {
			t.Fatalf("unread body (expect %v): %q", expect, line)
		}
	}
	// The seeded route: allowed, denied by its own rule, denied by the global rule (the client is read from
	// X-Forwarded-For: the peer, 127.0.0.1, is a trusted proxy).
	status, body := guardPost(t, n, "/webhooks/sample", "", small)
	if status != http.StatusCreated {
		t.Fatalf("seeded route: %d %v", status, body)
	}
	id := body["id"].(string)
	if status, body = guardPost(t, n, "/webhooks/sample", "198.51.100.7", small); status != http.StatusForbidden || body["error"] != "forbidden" {
		t.Fatalf("route rule deny: %d %v", status, body)
	}
	if status, body = guardPost(t, n, "/webhooks/sample", "203.0.113.9, 127.0.0.1", big); status != http.StatusForbidden || body["error"] != "forbidden" {
		t.Fatalf("global rule deny: %d %v", status, body)
	}
	if line := refusedUnread(t, n, "/webhooks/sample", true); !strings.HasPrefix(line, "HTTP/1.1 413") {
		// An allowed route goes on to the Content-Length check: the guard let it through.
		t.Fatalf("allowed route, announced body over the cap: %q", line)
	}
	if status, hook := n.adminCall(t, "GET", "/v1/hooks/"+id, ""); status != http.StatusOK || hook["source_id"] != "sample" {
		t.Fatalf("the accepted hook is not stored: %d %v", status, hook)
	}

	// A route created through the API is in force at once; the same spec again writes no row.
	spec := `{"id":"catch","path":"/catch/*","metadata":{"team":"payments"}}`
	if status, body = n.adminCall(t, "POST", "/v1/routes", spec); status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, body)
	}
	// The guard lets /catch/... through; the URL routing then finds no source there (404 unknown_source), a
	// refusal of the next step, not of the guard.
	if status, body = guardPost(t, n, "/catch/a/b", "", small); status != http.StatusNotFound || body["error"] != "unknown_source" {
		t.Fatalf("after the create: %d %v", status, body)
	}
	if status, body = n.adminCall(t, "PUT", "/v1/routes/catch", spec); status != http.StatusOK || body["audit_seq"] != nil {
		t.Fatalf("no-op put: %d %v", status, body)
	}
	if status, body = n.adminCall(t, "PATCH", "/v1/routes/seeded", `{"methods":["PUT"]}`); status != http.StatusOK {
		t.Fatalf("patch: %d %v", status, body)
	}
	if status, body = guardPost(t, n, "/webhooks/sample", "", small); status != http.StatusNotFound || body["error"] != "not_found" {
		t.Fatalf("POST after the route became PUT only: %d %v", status, body)
	}
	_, audit := n.adminCall(t, "GET", "/v1/audit", "")
	var actions []string
	for _, e := range audit["entries"].([]any) {
		actions = append(actions, e.(map[string]any)["action"].(string)+" "+e.(map[string]any)["subject"].(string))
	}
	want := "route.create route:seeded,route.create route:catch,route.update route:seeded"
	if strings.Join(actions, ",") != want {
		t.Fatalf("audit rows %v, want %s", actions, want)
	}
	waitUntil(t, 15*time.Second, "three route events", func() bool { return len(rec.confirmed()) >= 3 })
	for i, typ := range []string{"io.ankusa.route.created", "io.ankusa.route.created", "io.ankusa.route.updated"} {
		if a := rec.confirmed()[i]; a.Type != typ {
			t.Fatalf("event %d: %+v, want %s", i, a, typ)
		}
	}
	ev := rec.confirmed()[1]
	if ev.Subject != "route:catch" || ev.Data["path"] != "/catch/*" || ev.Revision != 1 {
		t.Fatalf("route event %+v", ev)
	}
	t.Logf("route event: id=%s type=%s subject=%s revision=%v", ev.ID, ev.Type, ev.Subject, ev.Revision)

	// The decisions are counted by bounded reason, and the table's size is a gauge.
	resp, err := testClient.Get(n.adminURL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{`ankusa_routes_decisions_total{decision="reject",instance="routeguard",reason="no_route"}`,
		`ankusa_routes_decisions_total{decision="reject",instance="routeguard",reason="ip_denied"}`,
		`ankusa_routes_decisions_total{decision="allow",instance="routeguard",reason="matched"}`,
		`ankusa_routes{instance="routeguard"} 2`} {
		if !strings.Contains(string(scrape), series) {
			t.Fatalf("the scrape has no %s", series)
		}
	}

	// kill -9, a new node on the same data dir: the API's changes are in force, the seed did not undo them.
	n.kill()
	n = startAdminNodeWith(t, "routeguard", dir, extra)
	if status, body = guardPost(t, n, "/webhooks/sample", "", small); status != http.StatusNotFound {
		t.Fatalf("after restart, the patched seed route took a POST: %d %v", status, body)
	}
	if status, body = guardPost(t, n, "/catch/a", "", small); status != http.StatusNotFound || body["error"] != "unknown_source" {
		t.Fatalf("after restart, the API route is gone: %d %v", status, body)
	}
	if status, body = n.adminCall(t, "GET", "/v1/routes/catch", ""); status != http.StatusOK || body["revision"] != 1.0 {
		t.Fatalf("after restart: %d %v", status, body)
	}
	if status, body = n.adminCall(t, "DELETE", "/v1/routes/seeded", ""); status != http.StatusNoContent {
		t.Fatalf("delete: %d %v", status, body)
	}
	if status, body = guardPost(t, n, "/webhooks/sample", "", small); status != http.StatusNotFound || body["error"] != "not_found" {
		t.Fatalf("after the delete: %d %v", status, body)
	}
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
}
