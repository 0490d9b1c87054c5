package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/poll"
)

// ingest posts one hook to the instance's ingest path and returns the status.
func ingest(t *testing.T, addr, path string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "POST", "http://"+addr+path, strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

const (
	acmeWriter = "acme-writer" // sources:read, sources:write on tenant acme only
	logSpec    = `{"sinks":[{"type":"log"}]}`
)

func startSources(t *testing.T, name string, mutate func(*config.Config)) (base, ingestAddr string) {
	t.Helper()
	inst := startAdmin(t, name, func(cfg *config.Config) {
		cfg.Admin.Principals = append(testPrincipals(), config.Principal{Name: "acmewriter",
			TokenSHA256: hashOf(acmeWriter), Scopes: []string{"sources:read", "sources:write"}, Tenants: []string{"acme"}})
		if mutate != nil {
			mutate(cfg)
		}
	})
	return "http://" + inst.AdminAddr(), inst.IngestAddr()
}

// Issue 12: tenant sources CRUD with the same validation as YAML, the auth rules, and the edge picking a
// changed source up without a restart.
func TestSourcesCRUD(t *testing.T) {
	base, in := startSources(t, "srccrud", nil)
	src := base + "/v1/tenants/acme/sources"
	// raw sends body as it is written (call marshals it: a json.RawMessage stays as written).
	raw := func(method, url, token, body string) answer {
		t.Helper()
		if body == "" {
			return call(t, method, url, token, nil)
		}
		return call(t, method, url, token, json.RawMessage(body))
	}
	call(t, "GET", src, "", nil).want(t, "no token", http.StatusUnauthorized, "unauthorized")
	call(t, "GET", src, readerToken, nil).want(t, "no sources scope", http.StatusForbidden, "forbidden")
	call(t, "GET", base+"/v1/tenants/other/sources", acmeWriter, nil).want(t, "other tenant", http.StatusForbidden, "forbidden")
	call(t, "GET", base+"/v1/tenants/a.b/sources", opsToken, nil).want(t, "bad tenant", http.StatusBadRequest, "invalid_tenant")
	raw("PUT", base+"/v1/tenants/other/sources/x", acmeWriter, logSpec).want(t, "put other tenant", http.StatusForbidden, "forbidden")
	raw("PUT", src+"/a.b", opsToken, logSpec).want(t, "bad name", http.StatusBadRequest, "invalid_filter")
	a := raw("PUT", src+"/gh", opsToken, `{"sinks":[]}`)
	a.want(t, "no sinks", http.StatusBadRequest, "invalid_source")
	if !strings.Contains(a.body["problems"].([]any)[0].(map[string]any)["path"].(string), "sources.gh.sinks") {
		t.Fatalf("problems %v", a.body)
	}
	raw("PUT", src+"/gh", opsToken, `{"sinks":[{"type":"log"}],"nope":1}`).want(t, "unknown key", http.StatusBadRequest, "invalid_source")
	raw("PUT", src+"/gh", opsToken, `{"tenant":"other","sinks":[{"type":"log"}]}`).want(t, "other tenant in body", http.StatusBadRequest, "invalid_source")
	raw("PUT", src+"/sample", opsToken, logSpec).want(t, "file source", http.StatusConflict, "source_store_read_only")
	raw("DELETE", src+"/sample", opsToken, "").want(t, "delete file source", http.StatusConflict, "source_store_read_only")
	call(t, "GET", src+"/gh", opsToken, nil).want(t, "absent", http.StatusNotFound, "source_not_found")
	raw("DELETE", src+"/gh", opsToken, "").want(t, "delete absent", http.StatusNotFound, "source_not_found")

	if got := ingest(t, in, "/webhooks/gh"); got != http.StatusNotFound {
		t.Fatalf("ingest before the source exists: %d", got)
	}
	spec := `{"sinks":[{"type":"log"}],"verify":{"type":"github","secret":"s3cr3t-source-value"},"on_verify_failure":"accept_flag"}`
	a = raw("PUT", src+"/gh", acmeWriter, spec)
	a.want(t, "create", http.StatusCreated, "")
	if a.body["source_id"] != "gh" || a.body["ingest_path"] != "/webhooks/gh" || a.body["revision"] != 1.0 {
		t.Fatalf("created %v", a.body)
	}
	raw("PUT", src+"/gh", acmeWriter, spec).want(t, "same again", http.StatusOK, "")
	raw("PUT", base+"/v1/tenants/beta/sources/gh", opsToken, logSpec).want(t, "id of another tenant", http.StatusConflict, "source_exists")
	// The edge takes the new source at once.
	if got := ingest(t, in, "/webhooks/gh"); got != http.StatusCreated {
		t.Fatalf("ingest after create: %d", got)
	}
	g := call(t, "GET", src+"/gh", acmeWriter, nil)
	g.want(t, "get", http.StatusOK, "")
	if strings.Contains(strings.Join(flatten(g.body), " "), "s3cr3t-source-value") {
		t.Fatalf("GET shows the secret: %v", g.body)
	}
	l := call(t, "GET", src, acmeWriter, nil)
	if n := len(l.body["sources"].([]any)); n != 2 { // the file's sample (tenant acme) and gh
		t.Fatalf("list: %v", l.body)
	}
	raw("PUT", src+"/gh", opsToken, logSpec).want(t, "replace", http.StatusOK, "")
	// The hook ingested above may still be on its way to the log sink: a source with rows to deliver is refused
	// (409, nothing written or audited) until they settle.
	var del answer
	poll.True(t, 10*time.Second, "the delete once the source's hook is delivered", func() bool {
		del = raw("DELETE", src+"/gh", acmeWriter, "")
		return del.status != http.StatusConflict || del.body["error"] != "source_has_deliveries"
	})
	del.want(t, "delete", http.StatusNoContent, "")
	if got := ingest(t, in, "/webhooks/gh"); got != http.StatusNotFound {
		t.Fatalf("ingest after delete: %d", got)
	}
	rows := auditRows(t, base, opsToken, "?subject=source:acme/gh")
	var actions []string
	for _, r := range rows {
		actions = append(actions, r["action"].(string)+"@"+r["actor"].(string))
	}
	if strings.Join(actions, ",") != "source.create@acmewriter,source.update@ops,source.delete@acmewriter" {
		t.Fatalf("audit of gh: %v", actions)
	}
}

// flatten lists every string in v.
func flatten(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case map[string]any:
		var out []string
		for _, e := range t {
			out = append(out, flatten(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range t {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return nil
}

// source_store.type static: every write is 409 source_store_read_only.
func TestStaticSourceStoreRefusesWrites(t *testing.T) {
	base, _ := startSources(t, "srcstatic", func(cfg *config.Config) { cfg.SourceStore.Type = "static" })
	req, _ := http.NewRequest("PUT", base+"/v1/tenants/acme/sources/gh", strings.NewReader(logSpec))
	req.Header.Set("Authorization", "Bearer "+opsToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("put on a static store: %d", resp.StatusCode)
	}
}

// Issue 12 acceptance, TestNoSecretInAudit: a source change whose spec holds a verifier secret leaves audit rows
// (and entities) that never hold it, nor the caller's token; the trail holds keyed hashes only.
func TestNoSecretInAudit(t *testing.T) {
	const secret = "whsec-very-secret-value-0123456789"
	inst := startAdmin(t, "nosecret", nil)
	base := "http://" + inst.AdminAddr()
	put := func(spec string, want int) {
		t.Helper()
		req, _ := http.NewRequest("PUT", base+"/v1/tenants/acme/sources/gh", strings.NewReader(spec))
		req.Header.Set("Authorization", "Bearer "+opsToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("put: %d, want %d", resp.StatusCode, want)
		}
	}
	put(`{"sinks":[{"type":"log"}],"verify":{"type":"github","secret":"`+secret+`"}}`, http.StatusCreated)
	put(`{"sinks":[{"type":"log"}],"verify":{"type":"github","secret":["`+secret+`-2","`+secret+`"]}}`, http.StatusOK)
	rows, keys := 0, 0
	if err := inst.Store().ForEachAuditKey(func(k, v []byte) error {
		keys++
		if k[0] == 'a' {
			rows++
		}
		for _, s := range []string{secret, opsToken, "s3cr3t"} {
			if bytes.Contains(k, []byte(s)) || bytes.Contains(v, []byte(s)) {
				t.Errorf("audit key %x holds %q", k, s)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("%d audit rows, want 2", rows)
	}
	a := call(t, "GET", base+"/v1/audit", opsToken, nil)
	if got := strings.Join(flatten(a.body), " "); strings.Contains(got, secret) {
		t.Fatal("GET /v1/audit shows the secret")
	}
	t.Logf("%d audit keys scanned (%d rows): no secret, no token", keys, rows)
}

// sourceRows reads every delivery row of source in the instance's store, by state.
func sourceRows(t *testing.T, db *store.DB, source string) map[uint8]int {
	t.Helper()
	states := map[uint8]int{}
	if err := db.ForEachKey(func(cf string, k, v []byte) error {
		if cf != "deliveries" || len(k) != store.DeliveryKeyLen {
			return nil
		}
		row, err := store.DecodeDeliveryRow(v)
		if err != nil {
			return err
		}
		if row.Source == source {
			states[row.State]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return states
}

// dlqReasons lists the reasons of source's DLQ entries as GET /v1/dlq serves them.
func dlqReasons(t *testing.T, base, source string) []string {
	t.Helper()
	a := call(t, "GET", base+"/v1/dlq?source_id="+source, opsToken, nil)
	a.want(t, "dlq", http.StatusOK, "")
	var out []string
	for _, e := range a.body["entries"].([]any) {
		out = append(out, e.(map[string]any)["reason"].(string))
	}
	return out
}

// Inventory A.5: a source whose rows are still queued is not deleted (409 source_has_deliveries with the
// counts, no audit row); ?deliveries=dead_letter deletes it and buries its rows ({source_gone, id}) in the
// DLQ, leaving no row waiting; any other value is 400; a source with no rows is deleted as before.
func TestDeleteSourceWithQueuedDeliveries(t *testing.T) {
	// An edge without dispatch: every accepted hook's row stays pending.
	inst := startAdmin(t, "srcbusy", func(cfg *config.Config) { cfg.Node.Roles = []string{"edge"} })
	base, in := "http://"+inst.AdminAddr(), inst.IngestAddr()
	src := base + "/v1/tenants/acme/sources"
	call(t, "PUT", src+"/gh", opsToken, json.RawMessage(logSpec)).want(t, "create gh", http.StatusCreated, "")
	call(t, "PUT", src+"/idle", opsToken, json.RawMessage(logSpec)).want(t, "create idle", http.StatusCreated, "")
	for range 3 {
		if got := ingest(t, in, "/webhooks/gh"); got != http.StatusCreated {
			t.Fatalf("ingest: %d", got)
		}
	}
	// Another source of the same tenant: its row is not counted, nor buried.
	if got := ingest(t, in, "/webhooks/sample"); got != http.StatusCreated {
		t.Fatalf("ingest sample: %d", got)
	}
	before := len(auditRows(t, base, opsToken, "?subject=source:acme/gh"))

	a := call(t, "DELETE", src+"/gh", opsToken, nil)
	a.want(t, "delete with queued rows", http.StatusConflict, "source_has_deliveries")
	if a.body["pending"] != 3.0 || a.body["inflight"] != 0.0 {
		t.Fatalf("counts %v, want 3 pending, 0 in flight", a.body)
	}
	call(t, "GET", src+"/gh", opsToken, nil).want(t, "still there", http.StatusOK, "")
	if n := len(auditRows(t, base, opsToken, "?subject=source:acme/gh")); n != before {
		t.Fatalf("a refused delete wrote an audit row: %d rows, had %d", n, before)
	}
	for _, q := range []string{"deliveries=keep", "deliveries=", "deliveries=dead_letter&deliveries=dead_letter"} {
		a := call(t, "DELETE", src+"/gh?"+q, opsToken, nil)
		a.want(t, q, http.StatusBadRequest, "invalid_filter")
		if a.body["field"] != "deliveries" {
			t.Fatalf("%s: field %v", q, a.body["field"])
		}
	}
	call(t, "GET", src+"/gh", opsToken, nil).want(t, "still there after 400s", http.StatusOK, "")

	call(t, "DELETE", src+"/gh?deliveries=dead_letter", opsToken, nil).want(t, "dead-letter delete", http.StatusNoContent, "")
	call(t, "GET", src+"/gh", opsToken, nil).want(t, "gone", http.StatusNotFound, "source_not_found")
	reasons := dlqReasons(t, base, "gh")
	if len(reasons) != 3 {
		t.Fatalf("dlq of gh: %v, want 3 entries", reasons)
	}
	for _, r := range reasons {
		if r != "{source_gone, gh}" {
			t.Fatalf("dlq reason %q", r)
		}
	}
	if got := sourceRows(t, inst.Store(), "gh"); got[store.StateDead] != 3 || len(got) != 1 {
		t.Fatalf("rows of gh by state: %v, want 3 dead and nothing waiting", got)
	}
	if got := sourceRows(t, inst.Store(), "sample"); got[store.StatePending] != 1 || len(got) != 1 {
		t.Fatalf("rows of sample by state: %v, want its 1 pending row untouched", got)
	}
	ord, ok := inst.Store().TenantOrdinal("acme")
	if !ok {
		t.Fatal("tenant acme has no ordinal")
	}
	if c := inst.Store().TenantCounts(ord); c.Pending != 1 || c.Dead != 3 || c.Inflight != 0 {
		t.Fatalf("acme counters %+v, want 1 pending, 3 dead", c)
	}
	rows := auditRows(t, base, opsToken, "?subject=source:acme/gh")
	if len(rows) != before+1 || rows[len(rows)-1]["action"] != "source.delete" {
		t.Fatalf("audit of gh: %v", rows)
	}

	// No rows: deleted at once, with or without the query.
	call(t, "DELETE", src+"/idle", opsToken, nil).want(t, "delete idle", http.StatusNoContent, "")
	call(t, "PUT", src+"/idle", opsToken, json.RawMessage(logSpec)).want(t, "re-create idle", http.StatusCreated, "")
	call(t, "DELETE", src+"/idle?deliveries=dead_letter", opsToken, nil).want(t, "dead-letter idle", http.StatusNoContent, "")
}

// Inventory A.5: a row in flight counts (409 inflight 1); after a dead-letter delete its attempt's outcome
// lands and, its source gone, the failed row is dead-lettered ({source_gone, id}) rather than retried.
func TestDeleteSourceWithDeliveryInFlight(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { unblock(); sink.Close() })
	inst := startAdmin(t, "srcflight", nil)
	base := "http://" + inst.AdminAddr()
	src := base + "/v1/tenants/acme/sources"
	spec := `{"sinks":[{"type":"http","url":"` + sink.URL + `"}]}`
	call(t, "PUT", src+"/gh", opsToken, json.RawMessage(spec)).want(t, "create gh", http.StatusCreated, "")
	if got := ingest(t, inst.IngestAddr(), "/webhooks/gh"); got != http.StatusCreated {
		t.Fatalf("ingest: %d", got)
	}
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt never reached the sink")
	}
	a := call(t, "DELETE", src+"/gh", opsToken, nil)
	a.want(t, "delete with a row in flight", http.StatusConflict, "source_has_deliveries")
	if a.body["pending"] != 0.0 || a.body["inflight"] != 1.0 {
		t.Fatalf("counts %v, want 0 pending, 1 in flight", a.body)
	}
	call(t, "DELETE", src+"/gh?deliveries=dead_letter", opsToken, nil).want(t, "dead-letter delete", http.StatusNoContent, "")
	unblock()
	poll.True(t, 10*time.Second, "the in-flight row dead-lettered", func() bool {
		return inst.Store().Counts().Dead == 1
	})
	if r := dlqReasons(t, base, "gh"); len(r) != 1 || r[0] != "{source_gone, gh}" {
		t.Fatalf("dlq of gh: %v", r)
	}
	if got := sourceRows(t, inst.Store(), "gh"); got[store.StateDead] != 1 || len(got) != 1 {
		t.Fatalf("rows of gh by state: %v, want 1 dead", got)
	}
}
