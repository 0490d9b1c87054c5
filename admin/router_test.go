package admin_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/admin"
	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/test/capture"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/verify"
)

// The principals of these tests: each token is its principal's name.
const (
	opsToken    = "ops-token"    // every scope, every tenant
	readerToken = "reader-token" // dlq:read, quarantine:read, config:read; tenant acme only
	scraperTok  = "scraper-token"
)

func hashOf(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

func testPrincipals() []config.Principal {
	return []config.Principal{
		{Name: "ops", TokenSHA256: hashOf(opsToken), Scopes: config.AdminScopes, Tenants: []string{"*"}},
		{Name: "reader", TokenSHA256: strings.ToUpper(hashOf(readerToken)), Scopes: []string{"dlq:read", "quarantine:read", "config:read"},
			Tenants: []string{"acme"}},
		{Name: "scraper", TokenSHA256: hashOf(scraperTok), Scopes: []string{"metrics:read"}, Tenants: []string{"*"}},
	}
}

var client = &http.Client{Timeout: 10 * time.Second}

// startAdmin starts an instance (edge and dispatch) with the test principals and a log source of tenant acme.
func startAdmin(t *testing.T, name string, mutate func(*config.Config)) *instance.Instance {
	t.Helper()
	return fixture.Instance(t, name, func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge", "dispatch"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("acme", 1)}
		cfg.Admin.Principals = testPrincipals()
		if mutate != nil {
			mutate(cfg)
		}
	}, nil)
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

// call sends method url with token ("" = none) and body (nil = none) and decodes a JSON object answer.
func call(t *testing.T, method, url, token string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func (a answer) want(t *testing.T, what string, status int, code string) {
	t.Helper()
	if a.status != status || code != "" && a.body["error"] != code {
		t.Fatalf("%s: %d %v, want %d %q", what, a.status, a.body, status, code)
	}
}

// concrete turns a route pattern into a path the route serves.
func concrete(pattern string) string {
	return strings.ReplaceAll(pattern, "{id}", "0190a8f0-7f3a-7b4c-8d5e-6f708192a3b4")
}

// Inventory A.4: /health on the admin port answers {status, instance, roles, version}; /ready reports the store.
// Both stay open whatever the principals.
func TestHealthAndReadyNeedNoCredentials(t *testing.T) {
	inst := startAdmin(t, "probe", nil)
	base := "http://" + inst.AdminAddr()
	a := call(t, "GET", base+"/health", "", nil)
	if a.status != http.StatusOK || a.body["status"] != "ok" || a.body["instance"] != "probe" || a.body["roles"] == nil {
		t.Fatalf("/health: %d %v", a.status, a.body)
	}
	if a = call(t, "GET", base+"/ready", "", nil); a.status != http.StatusOK || a.body["store"] != "ok" {
		t.Fatalf("/ready: %d %v", a.status, a.body)
	}
	call(t, "GET", base+"/v1/nope", opsToken, nil).want(t, "unknown route", http.StatusNotFound, "not_found")
}

// Issue 12: "Secure by default: with no principal configured every /v1/* route answers 401". Every route of
// the router is tried, so a route added without its guard fails here.
func TestEveryV1RouteAnswers401WithoutAPrincipal(t *testing.T) {
	inst := fixture.Instance(t, "closed", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge", "dispatch"}
	}, nil)
	base := "http://" + inst.AdminAddr()
	routes := admin.Patterns(&admin.Deps{Config: &config.Config{}})
	tried := 0
	for _, p := range routes {
		method, path, _ := strings.Cut(p, " ")
		if !strings.HasPrefix(path, "/v1/") || path == "/v1/openapi.yaml" {
			continue
		}
		tried++
		for _, tok := range []string{"", opsToken} {
			a := call(t, method, base+concrete(path), tok, map[string]any{})
			a.want(t, p, http.StatusUnauthorized, "unauthorized")
			if h := a.header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
				t.Fatalf("%s: WWW-Authenticate %q", p, h)
			}
		}
	}
	if tried < 10 {
		t.Fatalf("only %d /v1 routes tried", tried)
	}
	call(t, "GET", base+"/v1/openapi.yaml", "", nil)
}

// Issue 12: "401 without credentials, 403 without the scope": a token no principal holds is 401 with
// error="invalid_token"; a principal without the route's scope is 403 naming the scope.
func TestScopesAndTokens(t *testing.T) {
	inst := startAdmin(t, "scopes", nil)
	base := "http://" + inst.AdminAddr()
	a := call(t, "GET", base+"/v1/dlq", "not-a-token", nil)
	a.want(t, "unknown token", http.StatusUnauthorized, "unauthorized")
	if !strings.Contains(a.header.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("unknown token: WWW-Authenticate %q", a.header.Get("WWW-Authenticate"))
	}
	for _, p := range admin.Patterns(&admin.Deps{Config: &config.Config{}}) {
		method, path, _ := strings.Cut(p, " ")
		if !strings.HasPrefix(path, "/v1/") || path == "/v1/openapi.yaml" || path == "/v1/wal" {
			continue
		}
		a := call(t, method, base+concrete(path), scraperTok, map[string]any{})
		a.want(t, p+" as scraper", http.StatusForbidden, "forbidden")
		if a.body["scope"] == nil {
			t.Fatalf("%s: 403 without the scope it needs: %v", p, a.body)
		}
	}
	// metrics:read may read the store figures; /metrics stays open unless admin.metrics_auth.
	if a := call(t, "GET", base+"/v1/wal", scraperTok, nil); a.status != http.StatusOK || a.body["next_seq"] == nil {
		t.Fatalf("/v1/wal as scraper: %d %v", a.status, a.body)
	}
	call(t, "GET", base+"/metrics", "", nil).want(t, "open /metrics", http.StatusOK, "")
}

// Inventory A.5 ~metrics:read: with admin.metrics_auth the scrape needs a token holding metrics:read.
func TestMetricsAuth(t *testing.T) {
	inst := startAdmin(t, "scrape", func(cfg *config.Config) { cfg.Admin.MetricsAuth = true })
	base := "http://" + inst.AdminAddr()
	call(t, "GET", base+"/metrics", "", nil).want(t, "no token", http.StatusUnauthorized, "unauthorized")
	call(t, "GET", base+"/metrics", readerToken, nil).want(t, "reader", http.StatusForbidden, "forbidden")
	call(t, "GET", base+"/metrics", scraperTok, nil).want(t, "scraper", http.StatusOK, "")
}

// Design G.4: "tenant-scoped readers see only their tenants"; GET /v1/config is redacted.
func TestConfigIsRedactedAndTenantFiltered(t *testing.T) {
	inst := startAdmin(t, "cfg", func(cfg *config.Config) {
		cfg.Sources["other"] = fixture.LogSource("globex", 1)
	})
	base := "http://" + inst.AdminAddr()
	a := call(t, "GET", base+"/v1/config", opsToken, nil)
	a.want(t, "config as ops", http.StatusOK, "")
	raw, _ := json.Marshal(a.body)
	if strings.Contains(string(raw), hashOf(opsToken)) || !strings.Contains(string(raw), "[REDACTED]") {
		t.Fatalf("config shows a token hash or redacts nothing: %s", raw)
	}
	if srcs := a.body["sources"].(map[string]any); len(srcs) != 2 {
		t.Fatalf("ops sees sources %v", srcs)
	}
	a = call(t, "GET", base+"/v1/config", readerToken, nil)
	if srcs := a.body["sources"].(map[string]any); len(srcs) != 1 || srcs["sample"] == nil {
		t.Fatalf("reader of acme sees sources %v", srcs)
	}
	call(t, "GET", base+"/v1/wal", readerToken, nil).want(t, "node figures as a tenant reader", http.StatusForbidden, "forbidden")
}

// Inventory A.5 /v1/dlq: newest first, metadata only, {total, entries}; tenant-filtered for a tenant
// principal; paged with a cursor; malformed filters are 400 invalid_filter naming the field.
func TestDLQListsPagesAndFilters(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(422) }))
	t.Cleanup(sink.Close)
	httpSink := func(tenant string) config.Source {
		return config.Source{Tenant: tenant, Sinks: []config.SinkSpec{{Type: "http", Options: map[string]any{"url": sink.URL}}}}
	}
	inst := startAdmin(t, "dlq", func(cfg *config.Config) {
		cfg.Sources = map[string]config.Source{"a": httpSink("acme"), "g": httpSink("globex")}
	})
	for _, src := range []string{"a", "g", "a"} {
		fixture.Post(t, inst.IngestAddr(), src, []byte(`{}`), nil)
	}
	poll.True(t, 10*time.Second, "three dead rows", func() bool { return inst.Store().Counts().Dead == 3 })
	base := "http://" + inst.AdminAddr()

	a := call(t, "GET", base+"/v1/dlq", opsToken, nil)
	if a.status != http.StatusOK || a.body["total"] != 3.0 || len(a.body["entries"].([]any)) != 3 {
		t.Fatalf("dlq as ops: %d %v", a.status, a.body)
	}
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		a := call(t, "GET", base+"/v1/dlq?limit=2&cursor="+cursor, opsToken, nil)
		a.want(t, "page", http.StatusOK, "")
		for _, e := range a.body["entries"].([]any) {
			id := e.(map[string]any)["id"].(string)
			if seen[id] {
				t.Fatalf("entry %s on two pages", id)
			}
			seen[id] = true
		}
		next, _ := a.body["next_cursor"].(string)
		if next == "" || page > 3 {
			break
		}
		cursor = next
	}
	if len(seen) != 3 {
		t.Fatalf("pages listed %d entries, want 3", len(seen))
	}

	a = call(t, "GET", base+"/v1/dlq", readerToken, nil)
	a.want(t, "dlq as acme reader", http.StatusOK, "")
	if a.body["total"] != 2.0 || len(a.body["entries"].([]any)) != 2 {
		t.Fatalf("acme reader sees %v", a.body)
	}
	for _, e := range a.body["entries"].([]any) {
		if e.(map[string]any)["tenant_id"] != "acme" {
			t.Fatalf("acme reader sees %v", e)
		}
	}
	call(t, "GET", base+"/v1/dlq?tenant_id=globex", readerToken, nil).want(t, "other tenant", http.StatusForbidden, "forbidden")
	call(t, "GET", base+"/v1/dlq?tenant_id=a/b", opsToken, nil).want(t, "bad tenant", http.StatusBadRequest, "invalid_tenant")
	for _, q := range []string{"limit=x", "limit=-1", "since=soon", "cursor=AAAA", "source_id=" + strings.Repeat("s", 65)} {
		a := call(t, "GET", base+"/v1/dlq?"+q, opsToken, nil)
		a.want(t, q, http.StatusBadRequest, "invalid_filter")
		if field, _, _ := strings.Cut(q, "="); a.body["field"] != field {
			t.Fatalf("%s: field %v", q, a.body["field"])
		}
	}
	if a := call(t, "GET", base+"/v1/dlq?limit=5000", opsToken, nil); a.status != http.StatusOK {
		t.Fatalf("a limit over the cap is clamped, got %d", a.status)
	}
}

// Inventory F.5 and A.5: replay jobs are created, listed, read and steered over the API; a cancelled job
// cannot run again (409), an unknown one is 404, a malformed id 400.
func TestReplayJobs(t *testing.T) {
	// The job needs rows to move, or it ends "done" on its first tick and can no longer be paused: five dead
	// rows at one per second keep it running through the steering below.
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(422) }))
	t.Cleanup(sink.Close)
	inst := startAdmin(t, "replay", func(cfg *config.Config) {
		cfg.Sources = map[string]config.Source{"sample": {Tenant: "acme",
			Sinks: []config.SinkSpec{{Type: "http", Options: map[string]any{"url": sink.URL}}}}}
	})
	for range 5 {
		fixture.Post(t, inst.IngestAddr(), "sample", []byte(`{}`), nil)
	}
	poll.True(t, 10*time.Second, "five dead rows", func() bool { return inst.Store().Counts().Dead == 5 })
	base := "http://" + inst.AdminAddr()
	// A lifecycle job needs lifecycle.sinks: this node has none.
	if a := call(t, "POST", base+"/v1/replays", opsToken, map[string]any{"kind": "lifecycle"}); a.status != http.StatusConflict || a.body["error"] != "lifecycle_disabled" || a.body["setting"] != "lifecycle.sinks" {
		t.Fatalf("lifecycle job without lifecycle.sinks: %d %v", a.status, a.body)
	}
	call(t, "POST", base+"/v1/replays", opsToken, map[string]any{"kind": "quarantine"}).want(t, "quarantine kind", http.StatusBadRequest, "invalid_filter")
	call(t, "POST", base+"/v1/replays", opsToken, map[string]any{"kind": "dlq", "bogus": 1}).want(t, "unknown field", http.StatusBadRequest, "invalid_filter")
	call(t, "POST", base+"/v1/replays", opsToken, map[string]any{"kind": "dlq", "since": 5, "until": 4}).want(t, "until before since", http.StatusBadRequest, "invalid_filter")
	call(t, "POST", base+"/v1/replays", readerToken, map[string]any{"kind": "dlq"}).want(t, "reader", http.StatusForbidden, "forbidden")

	a := call(t, "POST", base+"/v1/replays", opsToken, map[string]any{"kind": "dlq", "source_id": "sample", "rate": 1})
	a.want(t, "create", http.StatusCreated, "")
	id, _ := a.body["id"].(string)
	if a.body["state"] != "running" || a.body["source_id"] != "sample" || a.body["rate"] != 1.0 {
		t.Fatalf("created job %v", a.body)
	}
	if a := call(t, "GET", base+"/v1/replays", opsToken, nil); len(a.body["jobs"].([]any)) != 1 {
		t.Fatalf("jobs %v", a.body)
	}
	call(t, "GET", base+"/v1/replays/"+id, opsToken, nil).want(t, "get", http.StatusOK, "")
	call(t, "GET", base+"/v1/replays/"+concrete("{id}"), opsToken, nil).want(t, "unknown job", http.StatusNotFound, "not_found")
	call(t, "GET", base+"/v1/replays/not-an-id", opsToken, nil).want(t, "bad id", http.StatusBadRequest, "invalid_filter")
	if a := call(t, "POST", base+"/v1/replays/"+id+"/pause", opsToken, nil); a.status != http.StatusOK || a.body["state"] != "paused" {
		t.Fatalf("pause: %d %v", a.status, a.body)
	}
	if a := call(t, "PATCH", base+"/v1/replays/"+id, opsToken, map[string]any{"state": "running"}); a.status != http.StatusOK || a.body["state"] != "running" {
		t.Fatalf("patch running: %d %v", a.status, a.body)
	}
	call(t, "PATCH", base+"/v1/replays/"+id, opsToken, map[string]any{"state": "done"}).want(t, "patch done", http.StatusBadRequest, "invalid_filter")
	call(t, "POST", base+"/v1/replays/"+id+"/cancel", opsToken, nil).want(t, "cancel", http.StatusOK, "")
	a = call(t, "POST", base+"/v1/replays/"+id+"/resume", opsToken, nil)
	a.want(t, "resume a cancelled job", http.StatusConflict, "conflict")
	if a.body["state"] != "cancelled" {
		t.Fatalf("conflict names state %v", a.body["state"])
	}
}

// Inventory A.5 `409 role_not_enabled {error, role}`: replay jobs need the dispatch role.
func TestReplayWithoutDispatchIs409(t *testing.T) {
	inst := startAdmin(t, "edgeonly", func(cfg *config.Config) { cfg.Node.Roles = []string{"edge"} })
	a := call(t, "POST", "http://"+inst.AdminAddr()+"/v1/replays", opsToken, map[string]any{"kind": "dlq"})
	a.want(t, "no dispatch", http.StatusConflict, "role_not_enabled")
	if a.body["role"] != "dispatch" {
		t.Fatalf("role %v", a.body["role"])
	}
}

// Inventory A.5 quarantine: the pen is listed newest first without bodies (tenant-filtered), released through
// the source's current verifier, and purged.
func TestQuarantineListReleasePurge(t *testing.T) {
	inst := startAdmin(t, "pen", func(cfg *config.Config) {
		cfg.Sources = map[string]config.Source{"gh": {Tenant: "globex", Sinks: []config.SinkSpec{{Type: "log"}},
			Verify: verify.Spec{Type: "github", Secret: verify.Secrets{"s3cr3t"}}, OnVerifyFailure: "quarantine"}}
	})
	resp, err := client.Post("http://"+inst.IngestAddr()+"/webhooks/gh", "application/json", strings.NewReader(`{"held":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("unsigned hook: %d, want 202", resp.StatusCode)
	}
	base := "http://" + inst.AdminAddr()
	poll.True(t, 10*time.Second, "the pen to hold it", func() bool {
		a := call(t, "GET", base+"/v1/quarantine", opsToken, nil)
		return a.status == http.StatusOK && len(a.body["entries"].([]any)) == 1
	})
	a := call(t, "GET", base+"/v1/quarantine", opsToken, nil)
	e := a.body["entries"].([]any)[0].(map[string]any)
	if e["source_id"] != "gh" || e["tenant_id"] != "globex" || e["body"] != nil {
		t.Fatalf("entry %v", e)
	}
	if a := call(t, "GET", base+"/v1/quarantine", readerToken, nil); a.status != http.StatusOK || len(a.body["entries"].([]any)) != 0 {
		t.Fatalf("acme reader sees globex's pen: %d %v", a.status, a.body)
	}
	call(t, "POST", base+"/v1/quarantine/release", readerToken, map[string]any{}).want(t, "reader release", http.StatusForbidden, "forbidden")
	a = call(t, "POST", base+"/v1/quarantine/release", opsToken, map[string]any{"source_id": "gh"})
	if a.status != http.StatusOK || a.body["held"] != 1.0 || a.body["released"] != 0.0 {
		t.Fatalf("release of a hook that still fails: %d %v", a.status, a.body)
	}
	call(t, "DELETE", base+"/v1/quarantine?id=nope", opsToken, nil).want(t, "bad id", http.StatusBadRequest, "invalid_filter")
	call(t, "DELETE", base+"/v1/quarantine?since=5&until=4", opsToken, nil).want(t, "bad window", http.StatusBadRequest, "invalid_filter")
	a = call(t, "DELETE", base+"/v1/quarantine?id="+e["id"].(string), opsToken, nil)
	if a.status != http.StatusOK || a.body["deleted"] != 1.0 {
		t.Fatalf("purge: %d %v", a.status, a.body)
	}
	if a := call(t, "GET", base+"/v1/quarantine", opsToken, nil); len(a.body["entries"].([]any)) != 0 {
		t.Fatalf("pen after purge %v", a.body)
	}
}

// Issue 12: "runtime log level": PUT /v1/log-level changes what the instance logs, at once.
func TestLogLevelChangesAtRuntime(t *testing.T) {
	logs := &capture.Buffer{}
	inst := fixture.InstanceWith(t, "level", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("acme", 1)}
		cfg.Admin.Principals = testPrincipals()
	}, instance.Options{Log: zerolog.New(logs).Level(zerolog.InfoLevel)})
	url := "http://" + inst.AdminAddr() + "/v1/log-level"
	call(t, "PUT", url, opsToken, map[string]any{"level": "trace"}).want(t, "trace", http.StatusBadRequest, "invalid_filter")
	call(t, "PUT", url, readerToken, map[string]any{"level": "error"}).want(t, "reader", http.StatusForbidden, "forbidden")
	changes := func() int { return strings.Count(logs.String(), `"admin_change":"log level"`) }
	call(t, "PUT", url, opsToken, map[string]any{"level": "error"}).want(t, "error", http.StatusOK, "")
	// Its own change is logged at info after the level went to error: not written.
	if n := changes(); n != 0 {
		t.Fatalf("%d info lines after the level went to error", n)
	}
	call(t, "PUT", url, opsToken, map[string]any{"level": "info"}).want(t, "info", http.StatusOK, "")
	if n := changes(); n != 1 {
		t.Fatalf("%d info lines after the level went back to info, want 1", n)
	}
}

// Issue 12: "the embedded default of make run writes a local admin token file under the data dir (mode
// 0600) and logs its path" — and the token it holds opens every route; a restart keeps it.
func TestEmbeddedDefaultWritesALocalToken(t *testing.T) {
	dir := t.TempDir()
	logs := &capture.Buffer{}
	start := func(name string) *instance.Instance {
		return fixture.InstanceWith(t, name, func(cfg *config.Config) {
			cfg.Embedded = true
			cfg.Node.DataDir = dir
			cfg.Instance = "local"
			cfg.Node.Roles = []string{"edge"}
		}, instance.Options{Log: zerolog.New(logs).Level(zerolog.InfoLevel)})
	}
	inst := start("local")
	path := filepath.Join(dir, "local", admin.LocalTokenFile)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v", err, fi.Mode())
	}
	tok, _ := os.ReadFile(path)
	token := strings.TrimSpace(string(tok))
	if len(token) != 43 || !strings.Contains(logs.String(), path) || strings.Contains(logs.String(), token) {
		t.Fatalf("token of %d chars; log names the path %v; log holds the token %v", len(token),
			strings.Contains(logs.String(), path), strings.Contains(logs.String(), token))
	}
	call(t, "GET", "http://"+inst.AdminAddr()+"/v1/wal", token, nil).want(t, "local token", http.StatusOK, "")
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	inst = start("local")
	if again, _ := os.ReadFile(path); !bytes.Equal(again, tok) {
		t.Fatal("a restart replaced the local token")
	}
	call(t, "GET", "http://"+inst.AdminAddr()+"/v1/wal", token, nil).want(t, "local token after restart", http.StatusOK, "")
}

// admin.principals[].token_file: the node reads the token itself from the file when the listener starts; a
// file it cannot read fails the boot with an error naming the principal.
func TestTokenFilePrincipal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.token")
	if err := os.WriteFile(path, []byte("  file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inst := startAdmin(t, "tokfile", func(cfg *config.Config) {
		cfg.Admin.Principals = []config.Principal{{Name: "filed", TokenFile: path, Scopes: []string{"dlq:read"}, Tenants: []string{"*"}}}
	})
	call(t, "GET", "http://"+inst.AdminAddr()+"/v1/dlq", "file-token", nil).want(t, "token from file", http.StatusOK, "")

	cfg := config.Default()
	cfg.Instance, cfg.Node.DataDir = "missing", t.TempDir()
	cfg.HTTP.IP, cfg.HTTP.Port, cfg.Admin.Port, cfg.ClaimCheck.Port = "127.0.0.1", 0, 0, 0
	cfg.Node.Roles = []string{"edge"}
	cfg.Admin.Principals = []config.Principal{{Name: "filed", TokenFile: filepath.Join(t.TempDir(), "absent"), Scopes: []string{"dlq:read"}, Tenants: []string{"*"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	bad, err := instance.New(cfg, instance.Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Start()
	if err == nil {
		_ = bad.Stop()
		t.Fatal("an unreadable token_file started the node")
	}
	if !strings.Contains(err.Error(), "principal filed") {
		t.Fatalf("boot error %v does not name the principal", err)
	}
}

// An archive replay job is created over the API like a dlq one: it needs a window [since, until) ending by
// now, takes a tenant filter (a dlq job takes none), is refused 409 on a node without the storage role, and
// commits the archived hooks of its window again.
func TestArchiveReplayOverTheAPI(t *testing.T) {
	noArchive := startAdmin(t, "replay-noarchive", nil)
	nb := "http://" + noArchive.AdminAddr()
	now := time.Now().UnixMilli()
	call(t, "POST", nb+"/v1/replays", opsToken, map[string]any{"kind": "archive"}).want(t, "no window", http.StatusBadRequest, "invalid_filter")
	call(t, "POST", nb+"/v1/replays", opsToken, map[string]any{"kind": "archive", "since": now - 1000, "until": now + 60_000}).
		want(t, "window past now", http.StatusBadRequest, "invalid_filter")
	call(t, "POST", nb+"/v1/replays", opsToken, map[string]any{"kind": "dlq", "tenant_id": "acme"}).
		want(t, "dlq with a tenant", http.StatusBadRequest, "invalid_filter")
	call(t, "POST", nb+"/v1/replays", opsToken, map[string]any{"kind": "archive", "since": now - 1000, "until": now}).
		want(t, "no storage role", http.StatusConflict, "role_not_enabled")

	inst := startAdmin(t, "replay-archive", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge", "dispatch", "storage"}
		cfg.Storage.RollMS = 50
	})
	base := "http://" + inst.AdminAddr()
	since := time.Now().UnixMilli()
	for range 3 {
		fixture.Post(t, inst.IngestAddr(), "sample", []byte(`{"archived":1}`), nil)
	}
	poll.True(t, 15*time.Second, "the three hooks archived", func() bool { return inst.Store().Counts().ArchivePending == 0 })
	time.Sleep(2 * time.Millisecond) // until must be after the last receipt and not after now
	a := call(t, "POST", base+"/v1/replays", opsToken, map[string]any{"kind": "archive", "tenant_id": "acme",
		"since": since, "until": time.Now().UnixMilli(), "rate": 1000})
	a.want(t, "create archive job", http.StatusCreated, "")
	if a.body["kind"] != "archive" || a.body["tenant_id"] != "acme" {
		t.Fatalf("created job %v", a.body)
	}
	id, _ := a.body["id"].(string)
	poll.True(t, 15*time.Second, "the job to commit the window's three hooks again", func() bool {
		j := call(t, "GET", base+"/v1/replays/"+id, opsToken, nil)
		return j.body["state"] == "done" && j.body["moved"] == 3.0
	})
}
