package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/config"
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
	raw("DELETE", src+"/gh", acmeWriter, "").want(t, "delete", http.StatusNoContent, "")
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
