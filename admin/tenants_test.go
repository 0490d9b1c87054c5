package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/claimcheck"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/fixture/s3fake"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/test/services"
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

// Seed, Tenant erase: "removes its … delivery rows, archive obligations, quarantine rows, claim objects, dedupe
// keys … and commits the tombstone m:erased:<tenant> with one tenant.delete audit row": after the erase no key or
// value of any column family names the tenant, but for the tombstone and the audit trail (rows and subject
// revisions); outside the store no claim object is left under claims/tenant=acme/ (the claim store is S3),
// no fleet bucket of the tenant in Redis (rate_limits.scope fleet), and, with the Redis source store, no source of
// the tenant in Redis (each removed as an audited external change). Another tenant's rows, claim objects, bucket
// and sources stay. While it runs the tenant's hooks are 503 tenant_erasing.
func TestTenantEraseLeavesNoTrace(t *testing.T) {
	services.Require(t, "Redis", services.RedisAddr)
	for _, kind := range []string{config.SourceStorePersistent, config.SourceStoreRedis} {
		t.Run(kind, func(t *testing.T) { eraseLeavesNoTrace(t, kind) })
	}
}

func eraseLeavesNoTrace(t *testing.T, sourceStore string) {
	s3 := s3fake.Start(t)
	claimStore := s3.BlobStore("")
	prefix := fmt.Sprintf("ankusa-test:erase:%d:", time.Now().UnixNano())
	rdb := redis.NewClient(&redis.Options{Addr: services.RedisAddr})
	t.Cleanup(func() {
		ctx := context.Background()
		if keys, err := rdb.Keys(ctx, prefix+"*").Result(); err == nil && len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
		_ = rdb.Close()
	})
	inst := startAdmin(t, "erase-"+sourceStore, func(c *config.Config) {
		c.Node.Roles = []string{"edge", "storage"} // nothing delivers: every row stays until the erase
		c.Sources = eraseSources()
		c.ClaimCheck.Store = &claimStore
		// Fleet buckets: a byte rate so low that one hook's bucket lives for minutes unless deleted.
		c.RateLimits.Scope = config.ScopeFleet
		c.Fleet.Store = config.FleetStore{Addr: services.RedisAddr, KeyPrefix: prefix + "fleet:"}
		c.Fleet.TimeoutMS = 1000
		lim := config.TenantLimits{Rate: 1000, Burst: 1000, BytesRate: 0.01, BytesBurst: float64(c.HTTP.MaxBodyBytes)}
		c.RateLimits.Tenants = map[string]config.TenantLimits{"acme": lim, "globex": lim}
		if sourceStore == config.SourceStoreRedis {
			c.SourceStore = config.SourceStore{Type: config.SourceStoreRedis,
				Redis: config.FleetStore{Addr: services.RedisAddr, KeyPrefix: prefix + "sources:"}}
		}
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
	// A route of each (inventory G.5: "remove sources, routes, ...").
	call(t, "POST", base+"/v1/routes", opsToken, json.RawMessage(`{"id":"acme-route","path":"/acme-route","tenant":"acme"}`)).
		want(t, "acme route", http.StatusCreated, "")
	call(t, "POST", base+"/v1/routes", opsToken, json.RawMessage(`{"id":"globex-route","path":"/globex-route","tenant":"globex"}`)).
		want(t, "globex route", http.StatusCreated, "")
	// A runtime rate-limit override of each (inventory G.5: the tenant's goes with it).
	call(t, "PUT", base+"/v1/tenants/acme/rate-limit", opsToken, json.RawMessage(`{"rate":50,"burst":60}`)).
		want(t, "acme override", http.StatusOK, "")
	call(t, "PUT", base+"/v1/tenants/globex/rate-limit", opsToken, json.RawMessage(`{"rate":50,"burst":60}`)).
		want(t, "globex override", http.StatusOK, "")

	// Claim-check objects of both tenants, checked in as dispatch does (packs of one hook each, and one
	// pack of two bodies).
	bs, err := blob.Open(context.Background(), claimStore)
	if err != nil {
		t.Fatal(err)
	}
	checker := claimcheck.NewChecker(bs, claimcheck.Options{PackMaxBytes: 1 << 20})
	for i, tenant := range []string{"acme", "acme", "globex"} {
		if _, err := checker.CheckInHook(context.Background(), tenant, [16]byte{byte(i + 1)}, time.Now().Add(-time.Duration(i)*24*time.Hour), []byte("big body")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := checker.CheckIn(context.Background(), "acme", [][]byte{[]byte("one"), []byte("two")}); err != nil {
		t.Fatal(err)
	}
	claims := func(tenant string) int {
		n := 0
		if err := bs.List(context.Background(), claimcheck.TenantPrefix(tenant), func(blob.Object) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if claims("acme") != 3 || claims("globex") != 1 {
		t.Fatalf("claim objects before the erase: acme %d, globex %d", claims("acme"), claims("globex"))
	}
	// A hook of each after the overrides: each tenant's fleet byte bucket is in Redis.
	fixture.Post(t, inst.IngestAddr(), "acme-in", []byte(`{"fleet":1}`), nil)
	fixture.Post(t, inst.IngestAddr(), "globex-in", []byte(`{"fleet":1}`), nil)
	bucket := func(tenant string) int64 {
		n, err := rdb.Exists(context.Background(), prefix+"fleet:rl:{"+tenant+"}:b").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if bucket("acme") != 1 || bucket("globex") != 1 {
		t.Fatalf("fleet byte buckets before the erase: acme %d, globex %d", bucket("acme"), bucket("globex"))
	}
	redisSources := func(tenant string) (n int) {
		if sourceStore != config.SourceStoreRedis {
			return 0
		}
		specs, err := rdb.HGetAll(context.Background(), prefix+"sources:specs").Result()
		if err != nil {
			t.Fatal(err)
		}
		for f := range specs {
			if strings.HasPrefix(f, tenant+"/") {
				n++
			}
		}
		owners, err := rdb.HGetAll(context.Background(), prefix+"sources:owners").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range owners {
			if o == tenant {
				n++
			}
		}
		return n
	}
	if sourceStore == config.SourceStoreRedis && (redisSources("acme") != 2 || redisSources("globex") != 2) {
		t.Fatalf("Redis sources before the erase (spec and owner fields): acme %d, globex %d", redisSources("acme"), redisSources("globex"))
	}

	// A delivered record of each of acme's hooks (first sink delivered, the second waiting): its value names no
	// tenant, so the scan below finds it by its key.
	db := inst.Store()
	ord, _ := db.TenantOrdinal("acme")
	cs, err := db.ClaimDue(ord, time.Now().Add(time.Hour).UnixMilli(), 100, 0, nil)
	if err != nil || len(cs) == 0 {
		t.Fatalf("claimed %d of acme's rows, %v", len(cs), err)
	}
	delivered := 0
	for i := range cs {
		c := &cs[i]
		if c.Sink == 0 {
			c.Last = store.Attempt{Number: 1, StartedAt: time.Now().UnixMilli(), LatencyUS: 100, Class: store.AttemptOK}
			err = db.Complete(c)
			delivered++
		} else {
			err = db.Reschedule(c, 0, time.Now().UnixMilli(), "")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := deliveredRecords(t, inst); n != delivered {
		t.Fatalf("%d delivered records before the erase, want acme's %d", n, delivered)
	}

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
	if n := deliveredRecords(t, inst); n != 0 {
		t.Fatalf("%d of acme's delivered records left", n)
	}
	for _, id := range acmeIDs {
		call(t, "GET", base+"/v1/hooks/"+id, opsToken, nil).want(t, "erased hook", http.StatusNotFound, "not_found")
	}
	if c := inst.Store().Counts(); c.Pending != 3 { // globex's three hooks, one sink each
		t.Fatalf("counters after the erase: %+v", c)
	}
	rows := call(t, "GET", base+"/v1/audit?tenant_id=acme", opsToken, nil)
	if !strings.Contains(jsonOf(rows.body), `"action":"tenant.delete"`) {
		t.Fatalf("audit: %v", rows.body)
	}
	call(t, "GET", base+"/v1/routes/acme-route", opsToken, nil).want(t, "erased route", http.StatusNotFound, "route_not_found")
	call(t, "GET", base+"/v1/routes/globex-route", opsToken, nil).want(t, "other tenant's route", http.StatusOK, "")
	call(t, "GET", base+"/v1/tenants/acme/sources/api-src", opsToken, nil).want(t, "erased source", http.StatusNotFound, "source_not_found")
	call(t, "GET", base+"/v1/tenants/globex/sources/api-src-g", opsToken, nil).want(t, "other tenant's source", http.StatusOK, "")
	// The override is gone; the file's entry for the tenant stays in the file.
	if a := call(t, "GET", base+"/v1/tenants/acme/rate-limit", opsToken, nil); a.status != http.StatusOK || a.body["source"] != "config" {
		t.Fatalf("the erased tenant's override: %d %v, want the file's entry", a.status, a.body)
	}
	if a := call(t, "GET", base+"/v1/tenants/globex/rate-limit", opsToken, nil); a.status != http.StatusOK || a.body["source"] != "override" {
		t.Fatalf("the other tenant's override: %d %v", a.status, a.body)
	}
	if _, ok := inst.Edge().RateOverride("acme"); ok {
		t.Fatal("the edge still applies the erased tenant's override")
	}
	if n := claims("acme"); n != 0 {
		t.Fatalf("%d claim objects of acme left under %s", n, claimcheck.TenantPrefix("acme"))
	}
	if n := claims("globex"); n != 1 {
		t.Fatalf("globex's claim objects after acme's erase: %d, want 1", n)
	}
	if bucket("acme") != 0 || bucket("globex") != 1 {
		t.Fatalf("fleet byte buckets after the erase: acme %d (want 0), globex %d (want 1)", bucket("acme"), bucket("globex"))
	}
	if n := redisSources("acme"); n != 0 {
		t.Fatalf("%d Redis source fields of acme left", n)
	}
	if sourceStore == config.SourceStoreRedis {
		if n := redisSources("globex"); n != 2 {
			t.Fatalf("globex's Redis source fields after acme's erase: %d, want 2", n)
		}
		// The Redis delete is an external change: its row went pending, then ok.
		rows := call(t, "GET", base+"/v1/audit?tenant_id=acme", opsToken, nil)
		entries, _ := rows.body["entries"].([]any)
		found := false
		for _, e := range entries {
			m, _ := e.(map[string]any)
			if m["action"] == "source.delete" && m["subject"] == "source:acme/api-src" && m["status"] == "ok" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no finished source.delete row of the Redis source in the audit: %s", jsonOf(rows.body))
		}
	}
	t.Logf("outside the store: acme has %d claim objects, %d fleet bucket, %d Redis source fields; globex keeps %d claim object, %d bucket, %d Redis source fields",
		claims("acme"), bucket("acme"), redisSources("acme"), claims("globex"), bucket("globex"), redisSources("globex"))
	// Idempotent: a repeated DELETE answers erased.
	call(t, "DELETE", base+"/v1/tenants/acme?confirm=acme", opsToken, nil).want(t, "again", http.StatusOK, "")
	// Ingest takes the tenant again once erased (its static sources still name it).
	fixture.Post(t, inst.IngestAddr(), "acme-in", []byte(`{"after":1}`), nil)
}

// deliveredRecords counts the delivered records in the store (keys of the deliveries CF).
func deliveredRecords(t *testing.T, inst *instance.Instance) int {
	t.Helper()
	n := 0
	if err := inst.Store().ForEachKey(func(cf string, k, _ []byte) error {
		if _, err := store.ParseDeliveredKey(k); cf == "deliveries" && err == nil {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
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
