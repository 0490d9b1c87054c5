package admin_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/verify"
)

func eraseSources() map[string]config.Source {
	dedupe := &config.DedupeSpec{Preset: "github", TTLSeconds: 3600}
	return map[string]config.Source{
		"acme-in": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}, {Type: "log"}}, Dedupe: dedupe},
		"acme-pen": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}}, OnVerifyFailure: "quarantine", Dedupe: dedupe,
			Verify: verify.Spec{Type: "github", Secret: verify.Secrets{"s3cr3t"}}},
		"globex-in": {Tenant: "globex", Sinks: []config.SinkSpec{{Type: "log"}}, Dedupe: dedupe},
	}
}

// Seed, Tenant erase: "removes its … delivery rows, archive obligations, quarantine rows, … dedupe keys … and
// commits the tombstone m:erased:<tenant> with one tenant.delete audit row": after the erase no key or value of
// any column family names the tenant, but for the tombstone and the audit trail (rows and subject revisions); another tenant's
// rows are untouched. While it runs the tenant's hooks are 503 tenant_erasing.
func TestTenantEraseLeavesNoTrace(t *testing.T) {
	inst := startAdmin(t, "erase", func(c *config.Config) {
		c.Node.Roles = []string{"edge", "storage"} // nothing delivers: every row stays until the erase
		c.Sources = eraseSources()
	})
	base := "http://" + inst.AdminAddr()
	var acmeIDs []string
	for i, src := range []string{"acme-in", "acme-in", "globex-in"} {
		id := fixture.Post(t, inst.IngestAddr(), src, []byte(`{"n":1}`), http.Header{"X-Github-Delivery": {"ev-" + string(rune('a'+i))}})
		if src == "acme-in" {
			acmeIDs = append(acmeIDs, id)
		}
	}
	resp, err := client.Post("http://"+inst.IngestAddr()+"/webhooks/acme-pen", "application/json", strings.NewReader(`{"forged":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	poll.True(t, 10*time.Second, "the pen to hold acme's forged hook", func() bool { _, n := inst.Store().QuarantineStats(); return n == 1 })

	// An API-managed source of the tenant (persistent source store), and one of globex.
	call(t, "PUT", base+"/v1/tenants/acme/sources/api-src", opsToken, json.RawMessage(`{"sinks":[{"type":"log"}]}`)).
		want(t, "api source", http.StatusCreated, "")
	call(t, "PUT", base+"/v1/tenants/globex/sources/api-src-g", opsToken, json.RawMessage(`{"sinks":[{"type":"log"}]}`)).
		want(t, "api source", http.StatusCreated, "")
	// A runtime rate-limit override of each (inventory G.5: the tenant's goes with it).
	call(t, "PUT", base+"/v1/tenants/acme/rate-limit", opsToken, json.RawMessage(`{"rate":50,"burst":60}`)).
		want(t, "acme override", http.StatusOK, "")
	call(t, "PUT", base+"/v1/tenants/globex/rate-limit", opsToken, json.RawMessage(`{"rate":50,"burst":60}`)).
		want(t, "globex override", http.StatusOK, "")

	// Closed: ingest refuses the tenant, and only it.
	inst.Edge().CloseTenant("acme")
	resp, err = client.Post("http://"+inst.IngestAddr()+"/webhooks/acme-in", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a closed tenant's hook: %d", resp.StatusCode)
	}
	fixture.Post(t, inst.IngestAddr(), "globex-in", []byte(`{"open":1}`), nil)
	inst.Edge().OpenTenant("acme")

	// Refusals before anything is touched.
	call(t, "DELETE", base+"/v1/tenants/acme?confirm=acme", "", nil).want(t, "no token", http.StatusUnauthorized, "unauthorized")
	call(t, "DELETE", base+"/v1/tenants/acme?confirm=acme", readerToken, nil).want(t, "no scope", http.StatusForbidden, "forbidden")
	call(t, "DELETE", base+"/v1/tenants/acme", opsToken, nil).want(t, "no confirm", http.StatusBadRequest, "invalid_filter")
	call(t, "DELETE", base+"/v1/tenants/acme?confirm=globex", opsToken, nil).want(t, "wrong confirm", http.StatusBadRequest, "invalid_filter")
	call(t, "DELETE", base+"/v1/tenants/a%20b?confirm=a%20b", opsToken, nil).want(t, "bad tenant", http.StatusBadRequest, "invalid_tenant")

	a := call(t, "DELETE", base+"/v1/tenants/acme?confirm=acme", opsToken, nil)
	a.want(t, "erase", http.StatusOK, "")
	if a.body["state"] != "erased" {
		t.Fatalf("erase answered %v", a.body)
	}
	t.Logf("DELETE /v1/tenants/acme?confirm=acme: %d %v", a.status, a.body)

	traces, globex := 0, 0
	if err := inst.Store().ForEachKey(func(cf string, k, v []byte) error {
		if cf == "audit" || bytes.HasPrefix(k, []byte("m:erased:acme")) || bytes.HasPrefix(k, []byte("v:")) {
			return nil
		}
		if bytes.Contains(k, []byte("acme")) || bytes.Contains(v, []byte("acme")) {
			traces++
			t.Errorf("trace of acme left in %s: key %q", cf, k)
		}
		if bytes.Contains(k, []byte("globex")) || bytes.Contains(v, []byte("globex")) {
			globex++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if globex == 0 {
		t.Fatal("the erase removed the other tenant's rows too")
	}
	t.Logf("every column family scanned: %d keys or values name acme (tombstone and audit trail aside), %d name globex", traces, globex)
	for _, id := range acmeIDs {
		call(t, "GET", base+"/v1/hooks/"+id, opsToken, nil).want(t, "erased hook", http.StatusNotFound, "not_found")
	}
	if c := inst.Store().Counts(); c.Pending != 2 { // globex's two hooks, one sink each
		t.Fatalf("counters after the erase: %+v", c)
	}
	rows := call(t, "GET", base+"/v1/audit?tenant_id=acme", opsToken, nil)
	if !strings.Contains(jsonOf(rows.body), `"action":"tenant.delete"`) {
		t.Fatalf("audit: %v", rows.body)
	}
	call(t, "GET", base+"/v1/tenants/acme/sources/api-src", opsToken, nil).want(t, "erased source", http.StatusNotFound, "source_not_found")
	call(t, "GET", base+"/v1/tenants/globex/sources/api-src-g", opsToken, nil).want(t, "other tenant's source", http.StatusOK, "")
	if a := call(t, "GET", base+"/v1/tenants/acme/rate-limit", opsToken, nil); a.status != http.StatusOK || a.body["source"] != "none" {
		t.Fatalf("the erased tenant's override: %d %v, want none", a.status, a.body)
	}
	call(t, "GET", base+"/v1/tenants/globex/rate-limit", opsToken, nil).want(t, "other tenant's override", http.StatusOK, "")
	if _, ok := inst.Edge().RateOverride("acme"); ok {
		t.Fatal("the edge still applies the erased tenant's override")
	}
	// Idempotent: a repeated DELETE answers erased.
	call(t, "DELETE", base+"/v1/tenants/acme?confirm=acme", opsToken, nil).want(t, "again", http.StatusOK, "")
	// Ingest takes the tenant again once erased (its static sources still name it).
	fixture.Post(t, inst.IngestAddr(), "acme-in", []byte(`{"after":1}`), nil)
}

// Seed: "After it, Storage.fetch/2 answers {:error, :gone} (410 where served) for the tenant's archived hooks".
func TestErasedTenantArchivedHookIsGone(t *testing.T) {
	inst := startAdmin(t, "erase-archive", func(c *config.Config) {
		c.Node.Roles = []string{"edge", "dispatch", "storage"}
		c.Sources = eraseSources()
		c.Storage.RollMS, c.Storage.IntervalMS = 100, 100
	})
	base := "http://" + inst.AdminAddr()
	id := fixture.Post(t, inst.IngestAddr(), "acme-in", []byte(`{"archived":1}`), nil)
	other := fixture.Post(t, inst.IngestAddr(), "globex-in", []byte(`{"archived":2}`), nil)
	for _, h := range []string{id, other} {
		poll.True(t, 20*time.Second, "the hook to be delivered and archived", func() bool {
			a := call(t, "GET", base+"/v1/hooks/"+h, opsToken, nil)
			return a.status == http.StatusOK && a.body["where"] == "archived"
		})
	}
	call(t, "DELETE", base+"/v1/tenants/acme?confirm=acme", opsToken, nil).want(t, "erase", http.StatusOK, "")
	a := call(t, "GET", base+"/v1/hooks/"+id, opsToken, nil)
	a.want(t, "erased tenant's archived hook", http.StatusGone, "gone")
	t.Logf("GET /v1/hooks/%s after the erase: %d %v", id, a.status, a.body)
	call(t, "GET", base+"/v1/hooks/"+other, opsToken, nil).want(t, "another tenant's archived hook", http.StatusOK, "")
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
