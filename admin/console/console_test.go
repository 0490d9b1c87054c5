package console_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/verify"
)

// The principals of these tests: each token is its principal's name.
const (
	opsToken  = "ops-token"  // every scope, every tenant
	acmeToken = "acme-token" // reads and replays, tenant acme only
)

func hashOf(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

func principals() []config.Principal {
	return []config.Principal{
		{Name: "ops", TokenSHA256: hashOf(opsToken), Scopes: config.AdminScopes, Tenants: []string{"*"}},
		{Name: "acme-ops", TokenSHA256: hashOf(acmeToken), Scopes: []string{"dlq:read", "replays:write",
			"quarantine:read", "quarantine:write", "config:read"}, Tenants: []string{"acme"}},
	}
}

// recorder is an HTTP sink: it records the bodies it takes, or refuses them (422, a permanent failure that
// dead-letters at once) while failing is set.
type recorder struct {
	srv     *httptest.Server
	failing atomic.Bool
	mu      sync.Mutex
	bodies  []string
}

func newRecorder(t *testing.T) *recorder {
	rc := &recorder{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if rc.failing.Load() {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		rc.mu.Lock()
		rc.bodies = append(rc.bodies, string(b))
		rc.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *recorder) got(substr string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, b := range rc.bodies {
		if strings.Contains(b, substr) {
			return true
		}
	}
	return false
}

func httpSource(tenant, url string) config.Source {
	return config.Source{Tenant: tenant, Sinks: []config.SinkSpec{{Type: "http", Options: map[string]any{"url": url}}}}
}

// artefacts is where screenshots go: ANKUSA_ARTEFACTS when set, else the test's temporary directory.
func artefacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ANKUSA_ARTEFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "console", t.Name())
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shot saves a full-page screenshot of the tab as name.png.
func shot(dir, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		buf, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o600)
	})
}

// run runs actions in tab within a deadline, failing the test with what step failed.
func run(t *testing.T, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		dctx, dcancel := context.WithTimeout(tab, 5*time.Second)
		defer dcancel()
		loc, _ := chromedp.Run(dctx, chromedp.Location())
		html, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
		t.Fatalf("%s: %v (at %s: %.3000s)", what, err, loc, html)
	}
}

// get runs one action that returns a value.
func get[T any](t *testing.T, tab context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func signIn(t *testing.T, tab context.Context, base, token string) {
	t.Helper()
	run(t, tab, "sign in",
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("principal")),
	)
}

func text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	return get(t, tab, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

func startNode(t *testing.T, name string, mutate func(*config.Config)) *instance.Instance {
	t.Helper()
	return fixture.Instance(t, name, func(cfg *config.Config) {
		// storage: a delivered hook stays in the store (until it is archived), so its page can show it.
		cfg.Node.Roles = []string{"edge", "dispatch", "storage"}
		cfg.Admin.Principals = principals()
		cfg.Dispatch.Retry.MaxAttempts = 1
		if mutate != nil {
			mutate(cfg)
		}
	}, nil)
}

// TestConsoleInBrowser drives the console in headless Chromium against a running node: sign-in, the overview
// refreshed by its script, a delivered hook and its deliveries, a failing sink's hook found in the DLQ and
// replayed from the console to the recorder, a tenant-scoped principal refused another tenant's objects in
// the page and by the API, a change without the CSRF token refused; a screenshot of every page.
func TestConsoleInBrowser(t *testing.T) {
	rc := newRecorder(t)
	other := newRecorder(t)
	inst := startNode(t, "console", func(cfg *config.Config) {
		cfg.Sources = map[string]config.Source{"a": httpSource("acme", rc.srv.URL), "g": httpSource("globex", other.srv.URL)}
	})
	base := "http://" + inst.AdminAddr()
	dir := artefacts(t)
	tab := newTab(t)

	if !t.Run("SignIn", func(t *testing.T) {
		run(t, tab, "the sign-in form", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("token")),
			shot(dir, "signin"))
		signIn(t, tab, base, opsToken)
		if p := text(t, tab, "#principal"); !strings.Contains(p, "ops") {
			t.Fatalf("signed in as %q", p)
		}
		cookies := get(t, tab, "read document.cookie", chromedp.Evaluate[string](`document.cookie`))
		if cookies != "" {
			t.Fatalf("the session cookie is readable from script: %q", cookies)
		}
	}) {
		return
	}

	if !t.Run("DeliveredHookAttempts", func(t *testing.T) {
		id := fixture.Post(t, inst.IngestAddr(), "a", []byte(`{"delivered":"yes","n":1}`), nil)
		poll.True(t, 10*time.Second, "the recorder to take the hook", func() bool { return rc.got(`"delivered":"yes"`) })
		run(t, tab, "find the hook by id",
			chromedp.Navigate(base+"/console/hooks"),
			chromedp.WaitVisible(chromedp.ID("id")),
			chromedp.SendKeys(chromedp.ID("id"), id),
			chromedp.Click(chromedp.ID("find")),
			chromedp.WaitVisible(chromedp.ID("attempts")),
			shot(dir, "hook"))
		if got := text(t, tab, "#hook-id"); got != id {
			t.Fatalf("hook page shows %q, want %s", got, id)
		}
		if att := text(t, tab, "#attempts tbody"); !strings.Contains(att, "delivered") || !strings.Contains(att, "http") {
			t.Fatalf("deliveries: %q", att)
		}
		// The delivered sink's attempt, kept by its delivered record: the 200 the recorder answered, its latency,
		// and that the delivery ended delivered.
		run(t, tab, "the delivered hook's attempts", chromedp.WaitVisible(chromedp.CSS("#attempt-history tbody tr")),
			shot(dir, "hook-delivered-attempts"))
		rows := get(t, tab, "the attempt rows", chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("#attempt-history tbody tr")).map(function(r){return r.innerText})`))
		if len(rows) != 1 {
			t.Fatalf("attempts of a delivered hook: %q, want one", rows)
		}
		cells := strings.Split(rows[0], "\t")
		if len(cells) != 9 {
			t.Fatalf("attempt row %q: %d cells, want 9", rows[0], len(cells))
		}
		sink, typ, delivery, number, started, took, outcome, status := cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7]
		if sink != "0" || typ != "http" || delivery != "delivered" || number != "1" || started == "" || outcome != "ok" ||
			!strings.HasPrefix(status, "2") || len(status) != 3 || !(strings.HasSuffix(took, " µs") || strings.HasSuffix(took, " ms")) {
			t.Fatalf("the delivered attempt %q: sink %q type %q delivery %q number %q started %q latency %q outcome %q status %q",
				rows[0], sink, typ, delivery, number, started, took, outcome, status)
		}
		t.Logf("delivered hook %s, its attempt: %q", id, rows[0])
		if body := text(t, tab, "#body"); !strings.Contains(body, "\"delivered\": \"yes\"") {
			t.Fatalf("body not pretty-printed: %q", body)
		}
	}) {
		return
	}

	if !t.Run("Overview", func(t *testing.T) {
		run(t, tab, "the overview refreshes",
			chromedp.Navigate(base+"/console/"),
			chromedp.WaitVisible(chromedp.ID("figures")),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := chromedp.Poll[bool](`document.getElementById("f-acks-rate").textContent !== "—"`,
					chromedp.WithPollingTimeout(10*time.Second))(ctx, tg)
				return err
			}),
			shot(dir, "overview"))
		if acks := text(t, tab, "#f-acks"); acks == "0" {
			t.Fatalf("acks %q after a hook was acked", acks)
		}
		run(t, tab, "sources", chromedp.Navigate(base+"/console/sources"), chromedp.WaitVisible(chromedp.ID("sources")),
			shot(dir, "sources"))
		if s := text(t, tab, "#sources tbody"); !strings.Contains(s, "acme") || !strings.Contains(s, "globex") {
			t.Fatalf("sources: %q", s)
		}
	}) {
		return
	}

	if !t.Run("KeyboardAndLabels", func(t *testing.T) {
		// Every visible control has a label, and the first Tab reaches the skip link, on every page.
		const unlabelled = `Array.from(document.querySelectorAll("input:not([type=hidden]), button, select, textarea"))
			.filter(function(e){ return !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim(); })
			.map(function(e){ return e.outerHTML; }).join(" ")`
		for _, path := range []string{"/console/", "/console/sources", "/console/hooks", "/console/dlq", "/console/quarantine",
			"/console/replays", "/console/audit"} {
			run(t, tab, "open "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.ID("main")),
				chromedp.KeyEvent("\t"))
			if bad := get(t, tab, "labels of "+path, chromedp.Evaluate[string](unlabelled)); bad != "" {
				t.Fatalf("%s: controls without a label: %s", path, bad)
			}
			if f := get(t, tab, "focus on "+path, chromedp.Evaluate[string](`document.activeElement.className`)); f != "skip" {
				t.Fatalf("%s: the first Tab focused %q, want the skip link", path, f)
			}
		}
	}) {
		return
	}

	var deadID string
	if !t.Run("DLQReplay", func(t *testing.T) {
		rc.failing.Store(true)
		deadID = fixture.Post(t, inst.IngestAddr(), "a", []byte(`{"replayed":"from the console"}`), nil)
		poll.True(t, 10*time.Second, "the hook to be dead-lettered", func() bool { return inst.Store().Counts().Dead == 1 })
		// Its page shows the failed attempt: the status the sink answered, its outcome, latency and error.
		run(t, tab, "the dead hook's attempts",
			chromedp.Navigate(base+"/console/hooks?id="+deadID),
			chromedp.WaitVisible(chromedp.ID("attempt-history")),
			shot(dir, "hook-attempts"))
		row := text(t, tab, "#attempt-history tbody")
		for _, want := range []string{"422", "permanent", "destination answered 422", "http", " µs"} {
			if !strings.Contains(row, want) && !(want == " µs" && strings.Contains(row, " ms")) {
				t.Fatalf("the dead hook's attempts lack %q: %q", want, row)
			}
		}
		sel := `[id="sel-` + deadID + `-0"]`
		run(t, tab, "the DLQ lists it",
			chromedp.Navigate(base+"/console/dlq?source_id=a"),
			chromedp.WaitVisible(chromedp.CSS(sel)),
			shot(dir, "dlq"),
			chromedp.Click(chromedp.CSS(sel)),
			chromedp.Click(chromedp.ID("replay-selected")),
			chromedp.WaitVisible(chromedp.ID("confirm-text")),
			shot(dir, "dlq-confirm"))
		if c := text(t, tab, "#confirm-text"); !strings.HasPrefix(c, "Replay 1 dead-lettered delivery?") {
			t.Fatalf("confirmation %q", c)
		}
		rc.failing.Store(false)
		run(t, tab, "confirm the replay",
			chromedp.Click(chromedp.ID("confirm")),
			chromedp.WaitVisible(chromedp.ID("replays")),
			shot(dir, "replays"))
		if n := text(t, tab, "#notice"); !strings.Contains(n, "Created 1 replay job") {
			t.Fatalf("after the replay: %q", n)
		}
		poll.True(t, 15*time.Second, "the replayed hook at the recorder", func() bool { return rc.got(`"replayed":"from the console"`) })
		poll.True(t, 10*time.Second, "the DLQ to empty", func() bool { return inst.Store().Counts().Dead == 0 })
		// Its page now tells the whole story: the refused attempt, then the replay's delivery.
		run(t, tab, "the replayed hook's attempts",
			chromedp.Navigate(base+"/console/hooks?id="+deadID),
			chromedp.WaitVisible(chromedp.ID("attempt-history")),
			shot(dir, "hook-replayed"))
		if h := text(t, tab, "#attempt-history tbody"); !strings.Contains(h, "422") || !strings.Contains(h, "200") ||
			!strings.Contains(h, "delivered") || strings.Contains(h, "dead-lettered") {
			t.Fatalf("the replayed hook's attempts: %q", h)
		}
		run(t, tab, "the audit log", chromedp.Navigate(base+"/console/audit"), chromedp.WaitVisible(chromedp.ID("audit")),
			shot(dir, "audit"))
		if a := text(t, tab, "#audit tbody"); !strings.Contains(a, "replay.create") || !strings.Contains(a, "ops") {
			t.Fatalf("the audit log after a replay from the console: %q", a)
		}
	}) {
		return
	}

	if !t.Run("TenantIsolation", func(t *testing.T) {
		other.failing.Store(true)
		globexID := fixture.Post(t, inst.IngestAddr(), "g", []byte(`{"tenant":"globex"}`), nil)
		poll.True(t, 10*time.Second, "globex's hook dead-lettered", func() bool { return inst.Store().Counts().Dead == 1 })
		acme := newTab(t)
		signIn(t, acme, base, acmeToken)
		run(t, acme, "another tenant's hook",
			chromedp.Navigate(base+"/console/hooks?id="+globexID),
			chromedp.WaitVisible(chromedp.ID("notice")),
			shot(dir, "tenant-refused-hook"))
		if r := text(t, acme, "#notice"); !strings.Contains(r, "404 not_found") {
			t.Fatalf("acme's principal on globex's hook: %q", r)
		}
		run(t, acme, "the DLQ shows acme only", chromedp.Navigate(base+"/console/dlq"), chromedp.WaitVisible(chromedp.ID("dlq")),
			shot(dir, "tenant-dlq"))
		if d := text(t, acme, "#dlq tbody"); strings.Contains(d, globexID) || !strings.Contains(d, "No dead letter") {
			t.Fatalf("acme's DLQ page: %q", d)
		}
		run(t, acme, "another tenant's DLQ", chromedp.Navigate(base+"/console/dlq?tenant_id=globex"),
			chromedp.WaitVisible(chromedp.ID("refusal")))
		if r := text(t, acme, "#refusal"); !strings.Contains(r, "403") || !strings.Contains(r, "globex") {
			t.Fatalf("acme's principal on globex's DLQ: %q", r)
		}
		// A replay forged in acme's page (its own CSRF token, globex's dead letter) is refused by the API.
		run(t, tab, "globex's dead letter as ops", chromedp.Navigate(base+"/console/dlq?source_id=g"))
		deadAt := get(t, tab, "its selection value", chromedp.AttributeValue(chromedp.CSS(`[id="sel-`+globexID+`-0"]`), "value")).Value
		run(t, acme, "forge a replay", chromedp.Navigate(base+"/console/sources"), chromedp.WaitVisible(chromedp.ID("sources")),
			chromedp.Evaluate[chromedp.Void](`(function(){var f=document.querySelector("form.signout");f.action="/console/dlq/replay";
				var a=document.createElement("input");a.type="hidden";a.name="sel";a.value=`+jsString(deadAt)+`;f.appendChild(a);
				var b=document.createElement("input");b.type="hidden";b.name="confirm";b.value="yes";f.appendChild(b);f.submit();})()`),
			chromedp.WaitVisible(chromedp.ID("refusal")), shot(dir, "tenant-refused-replay"))
		if r := text(t, acme, "#refusal"); !strings.Contains(r, "403") {
			t.Fatalf("acme's forged replay of globex's dead letter: %q", r)
		}
		if inst.Store().Counts().Dead != 1 {
			t.Fatal("a refused replay moved globex's dead letter")
		}
		// The API refuses the same principal the same objects.
		for path, want := range map[string]int{"/v1/dlq?tenant_id=globex": 403, "/v1/replays": 403, "/v1/hooks/" + globexID: 404} {
			req, _ := http.NewRequest("GET", base+path, nil)
			req.Header.Set("Authorization", "Bearer "+acmeToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("API %s as acme: %d, want %d", path, resp.StatusCode, want)
			}
		}
	}) {
		return
	}

	if !t.Run("ChangeWithoutCSRF", func(t *testing.T) {
		run(t, tab, "a release without its CSRF token",
			chromedp.Navigate(base+"/console/quarantine"),
			chromedp.WaitVisible(chromedp.ID("release")),
			shot(dir, "quarantine"),
			chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('input[name="csrf"]').forEach(function(e){e.remove()})`),
			chromedp.Click(chromedp.ID("release")),
			chromedp.WaitVisible(chromedp.ID("refusal")),
			shot(dir, "csrf-refused"))
		if r := text(t, tab, "#refusal"); !strings.Contains(r, "CSRF") {
			t.Fatalf("a change without the CSRF token: %q", r)
		}
		// Still signed in: the refusal ended nothing.
		run(t, tab, "sign out", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("principal")),
			chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.ID("token")))
		run(t, tab, "after sign-out", chromedp.Navigate(base+"/console/dlq"), chromedp.WaitVisible(chromedp.ID("token")))
		loc := get(t, tab, "location", chromedp.Location())
		if !strings.HasSuffix(loc, "/console/signin") {
			t.Fatalf("after sign-out the DLQ page went to %s", loc)
		}
	}) {
		return
	}
	_ = deadID
}

func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

func githubSig(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// TestConsoleReleasesAQuarantinedHook: a hook signed with a secret the node does not know yet is held; after
// the node restarts knowing it, an operator inspects the held hook and releases it from the console, and it
// reaches the sink with its original id.
func TestConsoleReleasesAQuarantinedHook(t *testing.T) {
	rc := newRecorder(t)
	dataDir := t.TempDir()
	src := func(secrets ...string) config.Source {
		s := httpSource("acme", rc.srv.URL)
		s.Verify, s.OnVerifyFailure = verify.Spec{Type: "github", Secret: verify.Secrets(secrets)}, "quarantine"
		return s
	}
	body := []byte(`{"held":"until released"}`)
	inst := startNode(t, "pen", func(cfg *config.Config) {
		cfg.Node.DataDir = dataDir
		cfg.Sources = map[string]config.Source{"gh": src("old-secret")}
	})
	req, _ := http.NewRequest("POST", "http://"+inst.IngestAddr()+"/webhooks/gh", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", githubSig("new-secret", body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a hook signed with an unknown secret: %d, want 202 quarantined", resp.StatusCode)
	}
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	inst = startNode(t, "pen", func(cfg *config.Config) {
		cfg.Node.DataDir = dataDir
		cfg.Sources = map[string]config.Source{"gh": src("new-secret", "old-secret")}
	})
	base := "http://" + inst.AdminAddr()
	dir := artefacts(t)
	tab := newTab(t)
	signIn(t, tab, base, opsToken)
	run(t, tab, "inspect the held hook",
		chromedp.Navigate(base+"/console/quarantine"),
		chromedp.WaitVisible(chromedp.ID("quarantine")),
		chromedp.Click(chromedp.CSS("#quarantine tbody a")),
		chromedp.WaitVisible(chromedp.ID("body")),
		shot(dir, "quarantine-entry"))
	if b := text(t, tab, "#body"); !strings.Contains(b, `"held": "until released"`) {
		t.Fatalf("held body %q", b)
	}
	run(t, tab, "release it",
		chromedp.Click(chromedp.ID("release")),
		chromedp.WaitVisible(chromedp.ID("done")),
		shot(dir, "quarantine-released"))
	if d := text(t, tab, "#done"); !strings.HasPrefix(d, "Released 1,") {
		t.Fatalf("after the release: %q", d)
	}
	poll.True(t, 10*time.Second, "the released hook at the sink", func() bool { return rc.got(`"held":"until released"`) })
	if _, n := inst.Store().QuarantineStats(); n != 0 {
		t.Fatalf("the pen still holds %d", n)
	}
}
