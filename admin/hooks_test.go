package admin_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// GET /v1/hooks/{id}: a live hook with its metadata, headers as stored, body and one delivery summary per sink;
// 400 for a malformed id, 404 for an unknown one and for a tenant the principal does not see, 401/403.
func TestGetHook(t *testing.T) {
	inst := startAdmin(t, "hooks", func(c *config.Config) {
		// Edge only: nothing delivers, so the hook stays live with its delivery row pending.
		c.Node.Roles = []string{"edge"}
		c.Sources["beta-src"] = fixture.LogSource("beta", 1)
		c.Admin.Principals = append(c.Admin.Principals, config.Principal{Name: "beta", TokenSHA256: hashOf("beta-token"),
			Scopes: []string{"dlq:read"}, Tenants: []string{"beta"}})
	})
	base := "http://" + inst.AdminAddr()
	body := []byte(`{"order":42}`)
	id := fixture.Post(t, inst.IngestAddr(), "sample", body, http.Header{"X-Custom": {"kept"}})

	a := call(t, "GET", base+"/v1/hooks/"+id, opsToken, nil)
	a.want(t, "ops", http.StatusOK, "")
	got, _ := base64.StdEncoding.DecodeString(a.body["body_base64"].(string))
	if a.body["id"] != id || a.body["tenant_id"] != "acme" || a.body["source_id"] != "sample" || a.body["where"] != "live" ||
		string(got) != string(body) {
		t.Fatalf("hook %v", a.body)
	}
	dels, _ := a.body["deliveries"].([]any)
	if len(dels) != 1 || dels[0].(map[string]any)["state"] != "pending" {
		t.Fatalf("deliveries %v", a.body["deliveries"])
	}
	if _, ok := a.body["headers"].([]any); !ok {
		t.Fatalf("headers %v", a.body["headers"])
	}
	t.Logf("GET /v1/hooks/%s: where=%v tenant=%v deliveries=%v", id, a.body["where"], a.body["tenant_id"], dels)

	call(t, "GET", base+"/v1/hooks/"+id, readerToken, nil).want(t, "reader of acme", http.StatusOK, "")
	call(t, "GET", base+"/v1/hooks/"+id, "beta-token", nil).want(t, "reader of beta", http.StatusNotFound, "not_found")
	call(t, "GET", base+"/v1/hooks/"+id, "", nil).want(t, "no token", http.StatusUnauthorized, "unauthorized")
	call(t, "GET", base+"/v1/hooks/"+id, scraperTok, nil).want(t, "scraper", http.StatusForbidden, "forbidden")
	call(t, "GET", base+"/v1/hooks/not-an-id", opsToken, nil).want(t, "malformed", http.StatusBadRequest, "invalid_filter")
	call(t, "GET", base+"/v1/hooks/0190a8f0-7f3a-7b4c-8d5e-6f708192a3b4", opsToken, nil).
		want(t, "unknown", http.StatusNotFound, "not_found")
}

// GET /v1/hooks/{id} shows each delivery's attempts: a sink answering 503 until the retries give up leaves a
// dead row whose history has every attempt, numbered, with its status code, outcome, latency and error.
func TestGetHookShowsAttempts(t *testing.T) {
	var calls atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(sink.Close)
	inst := startAdmin(t, "attempts", func(c *config.Config) {
		c.Sources["h"] = config.Source{Tenant: "acme", Sinks: []config.SinkSpec{{Type: "http", Options: map[string]any{"url": sink.URL}}}}
		c.Dispatch.Retry = config.Retry{BaseMS: 1, MaxMS: 5, MaxAttempts: 3}
	})
	id := fixture.Post(t, inst.IngestAddr(), "h", []byte(`{}`), nil)
	poll.True(t, 15*time.Second, "the hook dead-lettered", func() bool { return inst.Store().Counts().Dead == 1 })

	a := call(t, "GET", "http://"+inst.AdminAddr()+"/v1/hooks/"+id, opsToken, nil)
	a.want(t, "ops", http.StatusOK, "")
	dels, _ := a.body["deliveries"].([]any)
	if len(dels) != 1 {
		t.Fatalf("deliveries %v", a.body["deliveries"])
	}
	d := dels[0].(map[string]any)
	hist, _ := d["history"].([]any)
	if d["state"] != "dead" || d["attempts"] != 3.0 || len(hist) != 3 {
		t.Fatalf("delivery %v", d)
	}
	for i, x := range hist {
		h := x.(map[string]any)
		err, _ := h["error"].(string)
		if h["attempt"] != float64(i+1) || h["status_code"] != 503.0 || h["outcome"] != "transient" ||
			h["started_at"].(float64) <= 0 || h["latency_us"].(float64) <= 0 || !strings.Contains(err, "503") {
			t.Fatalf("attempt %d: %v", i+1, h)
		}
	}
	t.Logf("history of %s: %v", id, hist)
}

// Issue 16, "find a delivered hook by id and see its attempts": a sink answering 503 once, then 200. Once the
// hook is delivered (the storage role keeps it in the store until it is archived), GET /v1/hooks/{id} shows
// its delivery as delivered with both attempts: the refusal, then the success with its 200 and latency.
func TestGetHookShowsADeliveredHooksAttempts(t *testing.T) {
	var calls atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(sink.Close)
	inst := startAdmin(t, "delivered", func(c *config.Config) {
		c.Node.Roles = []string{"edge", "dispatch", "storage"}
		c.Storage.RollMS = 600_000 // not archived (and so not deleted) while the test runs
		c.Sources["h"] = config.Source{Tenant: "acme", Sinks: []config.SinkSpec{{Type: "http", Options: map[string]any{"url": sink.URL}}}}
		c.Dispatch.Retry = config.Retry{BaseMS: 1, MaxMS: 5, MaxAttempts: 5}
	})
	id := fixture.Post(t, inst.IngestAddr(), "h", []byte(`{}`), nil)
	poll.True(t, 15*time.Second, "the hook delivered", func() bool {
		c := inst.Store().Counts()
		return calls.Load() == 2 && c.Pending+c.Scheduled+c.Inflight == 0
	})

	a := call(t, "GET", "http://"+inst.AdminAddr()+"/v1/hooks/"+id, opsToken, nil)
	a.want(t, "ops", http.StatusOK, "")
	dels, _ := a.body["deliveries"].([]any)
	if a.body["where"] != "live" || len(dels) != 1 {
		t.Fatalf("where %v, deliveries %v", a.body["where"], a.body["deliveries"])
	}
	d := dels[0].(map[string]any)
	hist, _ := d["history"].([]any)
	if d["state"] != "delivered" || d["attempts"] != 2.0 || d["sink_type"] != "http" || len(hist) != 2 {
		t.Fatalf("delivery %v", d)
	}
	first, last := hist[0].(map[string]any), hist[1].(map[string]any)
	if first["status_code"] != 503.0 || first["outcome"] != "transient" || first["attempt"] != 1.0 {
		t.Fatalf("first attempt %v", first)
	}
	if last["status_code"] != 200.0 || last["outcome"] != "ok" || last["attempt"] != 2.0 || last["latency_us"].(float64) <= 0 ||
		last["error"] != nil || d["delivered_at"].(float64) < last["started_at"].(float64) {
		t.Fatalf("final attempt %v (delivered_at %v)", last, d["delivered_at"])
	}
	t.Logf("GET /v1/hooks/%s after delivery: %v", id, d)
}
