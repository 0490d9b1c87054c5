package dispatch_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/ankusa-go/ankusa/test/capture"
	"github.com/ankusa-go/ankusa/test/fixture"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/verify"
)

// client is the HTTP client of these tests: a hang fails fast.
var client = &http.Client{Timeout: 10 * time.Second}

// headerSink is a real HTTP destination that keeps the headers of every request and answers status.
type headerSink struct {
	*httptest.Server
	mu     sync.Mutex
	got    []http.Header
	status int
}

func newHeaderSink(t *testing.T, status int) *headerSink {
	s := &headerSink{status: status}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.got = append(s.got, r.Header.Clone())
		s.mu.Unlock()
		w.WriteHeader(s.status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *headerSink) requests() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.got...)
}

// startLogged is start with the instance's logs, from level up, written to logs.
func startLogged(t *testing.T, sources map[string]config.Source, mutate func(*config.Config), level zerolog.Level, logs io.Writer) *instance.Instance {
	t.Helper()
	return fixture.InstanceWith(t, "hard", func(cfg *config.Config) {
		cfg.Admin.Enabled = false
		cfg.Dispatch.Retry = config.Retry{BaseMS: 20, MaxMS: 200, MaxAttempts: 10, Jitter: false}
		cfg.Dispatch.AttemptTimeoutMS = 2000
		cfg.Sources = sources
		if mutate != nil {
			mutate(cfg)
		}
	}, instance.Options{Log: zerolog.New(logs).Level(level)})
}

// post sends one hook with the given headers and returns the status and body of the answer.
func post(t *testing.T, inst *instance.Instance, path string, body []byte, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+inst.IngestAddr()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func deliveryRows(t *testing.T, inst *instance.Instance) []store.DeliveryRow {
	t.Helper()
	var rows []store.DeliveryRow
	if err := inst.Store().ForEachDelivery(func(_ uint64, r store.DeliveryRow) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

// Issue 8 item 9: a JSON dedupe key holding "\n" and "\x00" reaches the sink percent-encoded in its headers,
// at the first attempt; it used to be refused by Go's transport and retried for hours.
func TestPoisonDedupeKeyIsDeliveredAtOnce(t *testing.T) {
	sink := newHeaderSink(t, 200)
	src := httpSource("acme", sink.URL, true)
	src.Dedupe = &config.DedupeSpec{JSON: "id", TTLSeconds: 3600}
	inst := start(t, map[string]config.Source{"s": src}, nil)
	body, _ := json.Marshal(map[string]string{"id": "evt\n1\x00x"})
	if code, b := post(t, inst, "/webhooks/s", body, nil); code != 201 {
		t.Fatalf("ingest: %d %s", code, b)
	}
	poll.True(t, 10*time.Second, "the delivery", func() bool { return len(sink.requests()) >= 1 })
	poll.True(t, 5*time.Second, "the row to be settled", func() bool { return len(deliveryRows(t, inst)) == 0 })
	reqs := sink.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d attempts reached the sink, want 1", len(reqs))
	}
	if got := reqs[0].Get("X-Ankusa-Dedupe-Key"); got != "evt%0A1%00x" {
		t.Fatalf("X-Ankusa-Dedupe-Key = %q", got)
	}
	if got := reqs[0].Get("X-Ankusa-Idempotency-Key"); got != "acme:s:evt%0A1%00x" {
		t.Fatalf("X-Ankusa-Idempotency-Key = %q", got)
	}
}

// Issue 8 item 12: X-Forwarded-*, Forwarded and X-Real-IP are written by the caller, so they reach a sink
// only when the source opts in with forward_proxy_headers; credentials (X-Gitlab-Token) never do.
func TestProxyHeadersReachASinkOnlyWhenTheSourceOptsIn(t *testing.T) {
	off, on := newHeaderSink(t, 200), newHeaderSink(t, 200)
	opted := httpSource("default", on.URL, false)
	opted.ForwardProxyHeaders = true
	inst := start(t, map[string]config.Source{"off": httpSource("default", off.URL, false), "on": opted}, nil)
	hdr := map[string]string{"X-Forwarded-For": "203.0.113.9", "Forwarded": "for=203.0.113.9", "X-Real-IP": "203.0.113.9",
		"X-Gitlab-Token": "gl-s3cret", "X-Event": "push"}
	for _, p := range []string{"/webhooks/off", "/webhooks/on"} {
		if code, b := post(t, inst, p, []byte(`{}`), hdr); code != 201 {
			t.Fatalf("ingest %s: %d %s", p, code, b)
		}
	}
	poll.True(t, 10*time.Second, "both deliveries", func() bool { return len(off.requests()) == 1 && len(on.requests()) == 1 })
	for name, h := range map[string]http.Header{"off": off.requests()[0], "on": on.requests()[0]} {
		if h.Get("X-Event") != "push" || h.Get("X-Gitlab-Token") != "" {
			t.Fatalf("%s: forwarded %v", name, h)
		}
		proxied := h.Get("X-Forwarded-For") != "" || h.Get("Forwarded") != "" || h.Get("X-Real-Ip") != ""
		if proxied != (name == "on") {
			t.Fatalf("%s: proxy headers forwarded=%v: %v", name, proxied, h)
		}
	}
}

// Issue 8 item 10: a sink URL with its secret in the path (Slack style) never appears in a stored LastError or
// DeadReason, nor in a WARN log line, whether the destination refuses or cannot be reached.
func TestSinkURLSecretsStayOutOfRowsAndLogs(t *testing.T) {
	const token = "xoxbS3cr3tT0k3nAbCdEf0123"
	refusing := newHeaderSink(t, 410)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	var logs capture.Buffer
	inst := startLogged(t, map[string]config.Source{
		"gone":    httpSource("default", refusing.URL+"/services/T0001/B0001/"+token, false),
		"refused": httpSource("default", closed+"/services/T0001/B0001/"+token, false),
		"short": {Tenant: "default", Sinks: []config.SinkSpec{{Type: "http", Options: map[string]any{
			"url": closed + "/hooks/catch/123/abc1234", "secret_path": true}}}},
	}, func(c *config.Config) { c.Dispatch.Retry.MaxAttempts = 2 }, zerolog.WarnLevel, &logs)
	for _, p := range []string{"/webhooks/gone", "/webhooks/refused", "/webhooks/short"} {
		if code, b := post(t, inst, p, []byte(`{}`), nil); code != 201 {
			t.Fatalf("ingest %s: %d %s", p, code, b)
		}
	}
	poll.True(t, 15*time.Second, "three dead rows", func() bool { return counts(inst).Dead == 3 })
	dead, err := inst.Store().ListDead("", 10)
	if err != nil || len(dead) != 3 {
		t.Fatalf("dead %v %v", dead, err)
	}
	var texts []string
	for _, d := range dead {
		texts = append(texts, d.Reason)
	}
	for _, r := range deliveryRows(t, inst) {
		texts = append(texts, r.LastError, r.DeadReason)
	}
	texts = append(texts, logs.String())
	all := strings.Join(texts, "\n")
	for _, secret := range []string{token, "abc1234"} {
		if strings.Contains(all, secret) {
			t.Fatalf("a sink URL secret leaked:\n%s", all)
		}
	}
	if !strings.Contains(all, "/services/T0001/B0001/[REDACTED]") || !strings.Contains(logs.String(), "delivery dead-lettered") {
		t.Fatalf("reasons do not name the redacted target:\n%s", all)
	}
}

const ghSecret = "It's a Secret to Everybody"

func ghSign(body []byte) string {
	m := hmac.New(sha256.New, []byte(ghSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Issue 8 item 7; design: ":accept_flag (commits anyway, envelope marked flagged: true)", "a flood of forged
// requests spends no budget and can never lock a tenant out"; inventory D.3 "x-ankusa-verification
// (ok|failed|skipped)". Through real HTTP, the real store and a real HTTP sink: a forged hook under
// accept_flag is answered like any accepted hook, arrives marked failed, and leaves the tenant's quota
// whole; a verified one arrives ok, an unverified source's skipped.
func TestAcceptFlagMarksForgedHooksForTheSink(t *testing.T) {
	sink := newHeaderSink(t, 200)
	flagged := httpSource("acme", sink.URL, false)
	flagged.Verify = verify.Spec{Type: "github", Secret: verify.Secrets{ghSecret}}
	flagged.OnVerifyFailure = config.OnVerifyAcceptFlag
	inst := start(t, map[string]config.Source{"gh": flagged, "open": httpSource("beta", sink.URL, false)}, func(c *config.Config) {
		// One hook per hour for the tenant: any forged hook charged to it would refuse the verified one.
		c.RateLimits.Tenants = map[string]config.TenantLimits{"acme": {Rate: 1.0 / 3600, Burst: 1}}
	})

	const forged = 3
	ids := map[string]string{} // hook id -> the status its sink must see
	for i := range forged {
		body := fmt.Appendf(nil, `{"forged":%d}`, i)
		code, answer := post(t, inst, "/webhooks/gh", body, map[string]string{"X-Hub-Signature-256": ghSign([]byte("other"))})
		var a map[string]any
		if err := json.Unmarshal([]byte(answer), &a); err != nil || code != 201 || len(a) != 2 || a["status"] != "accepted" {
			t.Fatalf("forged hook answered %d %s, want 201 {\"status\":\"accepted\",\"id\":…}", code, answer)
		}
		if want := `{"status":"accepted","id":"` + a["id"].(string) + `"}`; answer != want {
			t.Fatalf("forged hook answered %s, want %s", answer, want)
		}
		ids[a["id"].(string)] = "failed"
	}
	body := []byte(`{"real":1}`)
	code, answer := post(t, inst, "/webhooks/gh", body, map[string]string{"X-Hub-Signature-256": ghSign(body)})
	if code != 201 {
		t.Fatalf("the verified hook after %d forged ones: %d %s (the forged ones spent the tenant's quota)", forged, code, answer)
	}
	var a struct{ ID string }
	_ = json.Unmarshal([]byte(answer), &a)
	ids[a.ID] = "ok"
	if code, answer := post(t, inst, "/webhooks/gh", body, map[string]string{"X-Hub-Signature-256": ghSign(body)}); code != 429 {
		t.Fatalf("the tenant's quota is not charged at all: %d %s", code, answer)
	}

	code, answer = post(t, inst, "/webhooks/open", body, nil)
	if err := json.Unmarshal([]byte(answer), &a); err != nil || code != 201 {
		t.Fatalf("unverified source: %d %s", code, answer)
	}
	ids[a.ID] = "skipped"

	poll.True(t, 10*time.Second, "every hook at the sink", func() bool { return len(sink.requests()) == len(ids) })
	for _, h := range sink.requests() {
		id := h.Get("X-Ankusa-Id")
		if got, want := h.Get("X-Ankusa-Verification"), ids[id]; got != want {
			t.Errorf("hook %s arrived with X-Ankusa-Verification %q, want %q", id, got, want)
		}
	}
}

// The log sink writes the status (and the flag) on its line.
func TestLogSinkLineCarriesTheVerificationStatus(t *testing.T) {
	var logs capture.Buffer
	src := fixtureLogSource()
	src.Verify = verify.Spec{Type: "github", Secret: verify.Secrets{ghSecret}}
	src.OnVerifyFailure = config.OnVerifyAcceptFlag
	inst := startLogged(t, map[string]config.Source{"gh": src}, nil, zerolog.InfoLevel, &logs)
	if code, answer := post(t, inst, "/webhooks/gh", []byte(`{}`), map[string]string{"X-Hub-Signature-256": "sha256=00"}); code != 201 {
		t.Fatalf("forged hook: %d %s", code, answer)
	}
	poll.True(t, 10*time.Second, "the log sink's line", func() bool { return strings.Contains(logs.String(), "hook delivered") })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "hook delivered") && !(strings.Contains(line, `"verification":"failed"`) && strings.Contains(line, `"flagged":true`)) {
			t.Fatalf("log sink line without the status: %s", line)
		}
	}
}

func fixtureLogSource() config.Source {
	return config.Source{Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}}}
}
