package httpsink

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a destination on a random loopback port that keeps every request it answered.
type recorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request // answered requests; their bodies are in bys
	bys map[string][][]byte
	// conns counts the connections accepted.
	conns atomic.Int32
	// reply answers a request; nil answers 204.
	reply func(w http.ResponseWriter, r *http.Request)
}

func newRecorder(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *recorder {
	rec := &recorder{bys: make(map[string][][]byte), reply: reply}
	rec.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rec.mu.Lock()
		rec.got = append(rec.got, r)
		id := r.Header.Get("X-Ankusa-Id")
		rec.bys[id] = append(rec.bys[id], b)
		rec.mu.Unlock()
		if rec.reply != nil {
			rec.reply(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	rec.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			rec.conns.Add(1)
		}
	}
	rec.srv.Start()
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) requests() []*http.Request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]*http.Request(nil), rec.got...)
}

func (rec *recorder) body(id string) []byte {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if b := rec.bys[id]; len(b) > 0 {
		return b[len(b)-1]
	}
	return nil
}

func newSink(t *testing.T, opts map[string]any) sinks.Sink {
	t.Helper()
	s, err := New(config.SinkSpec{Type: Type, Options: opts}, sinks.Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("New(%v): %v", keys(opts), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func deliver(t *testing.T, s sinks.Sink, e *sinks.Envelope) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return s.Deliver(ctx, e)
}

// target runs the conformance suite against a real HTTP server.
type target struct{ rec *recorder }

func (tg *target) New(t *testing.T) sinks.Sink {
	return newSink(t, map[string]any{"url": tg.rec.srv.URL + "/hooks"})
}
func (tg *target) Received(_ *testing.T, id string) ([][]byte, bool) {
	tg.rec.mu.Lock()
	defer tg.rec.mu.Unlock()
	b, ok := tg.rec.bys[id]
	return b, ok
}
func (tg *target) Broken(t *testing.T) sinks.Sink {
	return newSink(t, map[string]any{"url": closedURL(t)})
}

// closedURL is a loopback address where nothing listens.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr + "/hooks"
}

func TestConformance(t *testing.T) {
	sinktest.Run(t, &target{rec: newRecorder(t, nil)})
}

// Inventory D.2 http row: "2xx; 400/401/403/404/410/413/422 → permanent; 408/429/5xx with Retry-After →
// retry_after; redirects never followed".
func TestStatusMapping(t *testing.T) {
	now := time.Now()
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if ra := r.URL.Query().Get("ra"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "answer body")
	})
	type want struct {
		class      sinks.Class
		dmin, dmax time.Duration
	}
	perm := want{class: sinks.PermanentClass}
	trans := want{class: sinks.Transient}
	ra := func(lo, hi time.Duration) want { return want{sinks.RetryAfterClass, lo, hi} }
	date := now.Add(120 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		code       int
		retryAfter string
		want       *want // nil: success
	}{
		{200, "", nil}, {201, "", nil}, {202, "", nil}, {204, "", nil}, {299, "", nil},
		{400, "", &perm}, {401, "", &perm}, {403, "", &perm}, {404, "", &perm}, {410, "", &perm},
		{413, "", &perm}, {422, "", &perm}, {405, "", &perm}, {409, "", &perm}, {418, "", &perm},
		{404, "30", &perm}, // Retry-After does not rescue a permanent refusal
		{408, "", &trans}, {429, "", &trans}, {500, "", &trans}, {502, "", &trans}, {503, "", &trans},
		{504, "", &trans}, {599, "", &trans},
		{300, "", &trans}, {301, "", &trans}, {302, "", &trans}, {303, "", &trans}, {304, "", &trans},
		{307, "", &trans}, {308, "", &trans},
		{408, "3", ptr(ra(3*time.Second, 3*time.Second))},
		{429, "7", ptr(ra(7*time.Second, 7*time.Second))},
		{503, "0", ptr(ra(0, 0))},
		{500, date, ptr(ra(100*time.Second, 121*time.Second))},
		{503, now.Add(-time.Hour).UTC().Format(http.TimeFormat), ptr(ra(0, 0))},
		{503, "999999", ptr(ra(time.Hour, time.Hour))},                  // capped at 1 h
		{503, "99999999999999999999999", ptr(ra(time.Hour, time.Hour))}, // overflow is still "very long"
		{429, "soon", &trans}, {503, "-5", &trans}, {503, "1.5", &trans},
	}
	for _, c := range cases {
		u := rec.srv.URL + "/?code=" + strconv.Itoa(c.code) + "&ra=" + url.QueryEscape(c.retryAfter)
		one := newSink(t, map[string]any{"url": u})
		err := deliver(t, one, sinktest.Envelope([]byte("x")))
		name := strconv.Itoa(c.code) + " Retry-After=" + strconv.Quote(c.retryAfter)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: err = %v, want nil", name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: err = nil, want %s", name, c.want.class)
			continue
		}
		cl, d := sinks.Classify(err)
		if cl != c.want.class || d < c.want.dmin || d > c.want.dmax {
			t.Errorf("%s: Classify = %s %s, want %s in [%s, %s] (err: %v)", name, cl, d, c.want.class, c.want.dmin, c.want.dmax, err)
		}
		var se *StatusError
		if !errors.As(err, &se) || se.Code != c.code {
			t.Errorf("%s: error %v carries no StatusError with the code", name, err)
		} else if c.code >= 400 && se.Body != "answer body" {
			t.Errorf("%s: StatusError.Body = %q, want the answer's body", name, se.Body)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// Inventory D.2: "redirects never followed".
func TestRedirectIsNotFollowed(t *testing.T) {
	var followed atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer other.Close()
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusTemporaryRedirect)
	})
	err := deliver(t, newSink(t, map[string]any{"url": rec.srv.URL}), sinktest.Envelope([]byte("stay here")))
	if !errors.Is(err, ErrRedirect) || !strings.Contains(err.Error(), "redirect not followed") {
		t.Fatalf("err = %v, want ErrRedirect", err)
	}
	if cl, _ := sinks.Classify(err); cl != sinks.Transient {
		t.Fatalf("redirect classified %s, want transient", cl)
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("redirect target hit %d times", n)
	}
}

// Inventory D.2: `max_response_bytes` 65 536 — a destination cannot make an attempt read without bound.
func TestResponseBodyIsBounded(t *testing.T) {
	endless := func(code int) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			chunk := []byte(strings.Repeat("z", 32<<10))
			for {
				if _, err := w.Write(chunk); err != nil {
					return // the client hung up: the bound held
				}
				select {
				case <-r.Context().Done():
					return
				default:
				}
			}
		}
	}
	for _, code := range []int{200, 500} {
		rec := newRecorder(t, endless(code))
		// The attempt timeout is long: only the bound can end the read early.
		s := newSink(t, map[string]any{"url": rec.srv.URL, "max_response_bytes": 1024, "timeout_ms": 60_000})
		start := time.Now()
		err := deliver(t, s, sinktest.Envelope([]byte("x")))
		if el := time.Since(start); el > 10*time.Second {
			t.Fatalf("status %d: Deliver took %s reading an endless answer", code, el)
		}
		if code == 200 && err != nil {
			t.Fatalf("status 200: err = %v", err)
		}
		var se *StatusError
		if code == 500 && (!errors.As(err, &se) || len(se.Body) > snippetBytes) {
			t.Fatalf("status 500: err = %v, want a StatusError with at most %d body bytes", err, snippetBytes)
		}
	}
}

// One client per sink keeps connections alive: a short answer is drained so the connection is reused.
func TestConnectionIsReused(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	s := newSink(t, map[string]any{"url": rec.srv.URL})
	for i := 0; i < 5; i++ {
		if err := deliver(t, s, sinktest.Envelope(sinktest.Binary(100))); err != nil {
			t.Fatal(err)
		}
	}
	if n := rec.conns.Load(); n != 1 {
		t.Fatalf("5 sequential deliveries opened %d connections, want 1", n)
	}
}

func whsec(key string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key)) }

// Inventory D.3: "Standard Webhooks signing — webhook-id (hook id), webhook-timestamp,
// webhook-signature: v1,<base64 HMAC-SHA256(id.timestamp.body)> one entry per secret".
func TestStandardWebhooksSignature(t *testing.T) {
	rec := newRecorder(t, nil)
	keysUsed := []string{"first-secret-0123456789abcdef", "second-secret-0123456789abcdef"}
	for _, secret := range []any{whsec(keysUsed[0]), []any{whsec(keysUsed[0]), whsec(keysUsed[1])}} {
		s := newSink(t, map[string]any{"url": rec.srv.URL, "secret": secret})
		e := sinktest.Envelope(sinktest.Binary(4096))
		before := time.Now().Unix()
		if err := deliver(t, s, e); err != nil {
			t.Fatal(err)
		}
		reqs := rec.requests()
		r := reqs[len(reqs)-1]
		if got := r.Header.Get("Webhook-Id"); got != e.IDText {
			t.Fatalf("webhook-id = %q, want the hook id %q", got, e.IDText)
		}
		ts := r.Header.Get("Webhook-Timestamp")
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || n < before || n > time.Now().Unix() {
			t.Fatalf("webhook-timestamp = %q, want now in unix seconds", ts)
		}
		sigs := strings.Split(r.Header.Get("Webhook-Signature"), " ")
		want := 1
		if _, ok := secret.([]any); ok {
			want = 2
		}
		if len(sigs) != want {
			t.Fatalf("webhook-signature has %d entries, want %d (one per secret): %q", len(sigs), want, sigs)
		}
		for i, sig := range sigs {
			mac := hmac.New(sha256.New, []byte(keysUsed[i]))
			mac.Write([]byte(e.IDText + "." + ts + "."))
			mac.Write(rec.body(e.IDText))
			if exp := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); sig != exp {
				t.Fatalf("signature %d = %q, want %q", i, sig, exp)
			}
		}
	}
	// Without a secret, no signature headers.
	e := sinktest.Envelope([]byte("unsigned"))
	if err := deliver(t, newSink(t, map[string]any{"url": rec.srv.URL}), e); err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	if h := reqs[len(reqs)-1].Header; h.Get("Webhook-Signature") != "" || h.Get("Webhook-Id") != "" {
		t.Fatalf("unsigned sink sent signature headers: %v", h)
	}
}

// Inventory D.3: "Raw body verbatim; headers x-ankusa-id, x-ankusa-source, x-ankusa-idempotency-key,
// x-ankusa-tenant (when set), x-ankusa-dedupe-key, x-ankusa-replay-id (when set), x-ankusa-verification".
func TestRequestCarriesAnkusaHeaders(t *testing.T) {
	rec := newRecorder(t, nil)
	s := newSink(t, map[string]any{"url": rec.srv.URL + "/in?token=abc", "method": "PUT",
		"headers": map[string]any{"X-Static": "configured", "Authorization": "Bearer dest-token"}})
	e := sinktest.Envelope([]byte(`{"a":1}`))
	e.ContentType = "application/json; charset=utf-8"
	e.ReplayID = "rp-1"
	e.Verification = "skipped"
	if err := deliver(t, s, e); err != nil {
		t.Fatal(err)
	}
	r := rec.requests()[0]
	if r.Method != http.MethodPut || r.URL.Path != "/in" || r.URL.Query().Get("token") != "abc" {
		t.Fatalf("request line = %s %s", r.Method, r.URL)
	}
	want := map[string]string{
		"Content-Type":             e.ContentType,
		"X-Ankusa-Id":              e.IDText,
		"X-Ankusa-Source":          "sinktest",
		"X-Ankusa-Tenant":          "acme",
		"X-Ankusa-Idempotency-Key": "acme:sinktest:" + e.DedupeKey + "#replay:rp-1",
		"X-Ankusa-Dedupe-Key":      e.DedupeKey,
		"X-Ankusa-Replay-Id":       "rp-1",
		"X-Ankusa-Verification":    "skipped",
		"X-Static":                 "configured",
		"Authorization":            "Bearer dest-token", // the configured one, not the provider's
		"X-Provider-Event":         "push",
	}
	for k, v := range want {
		if got := r.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want [%q]", k, got, v)
		}
	}

	// Optional headers are absent when their field is empty.
	e = sinktest.Envelope(nil)
	e.Tenant, e.DedupeKey, e.Verification, e.ContentType = "", "", "", ""
	if err := deliver(t, s, e); err != nil {
		t.Fatal(err)
	}
	h := rec.requests()[1].Header
	for _, k := range []string{"X-Ankusa-Tenant", "X-Ankusa-Dedupe-Key", "X-Ankusa-Replay-Id", "X-Ankusa-Verification", "Content-Type"} {
		if v, ok := h[k]; ok {
			t.Errorf("%s sent (%q) for an empty field", k, v)
		}
	}
	if got := h.Get("X-Ankusa-Idempotency-Key"); got != e.IDText {
		t.Errorf("idempotency key without dedupe key = %q, want the id %q", got, e.IDText)
	}
}

// Inventory D.4: forwarded headers default to "all except authorization, proxy-authorization, cookie,
// x-api-key, host, content-length, content-type, connection, … and every x-ankusa-*".
func TestForwardedHeadersDropCredentials(t *testing.T) {
	rec := newRecorder(t, nil)
	stored := []sinks.Header{
		{Name: "authorization", Value: "Bearer provider"}, {Name: "proxy-authorization", Value: "Basic p"},
		{Name: "cookie", Value: "session=1"}, {Name: "x-api-key", Value: "k"}, {Name: "x-ankusa-id", Value: "spoofed"},
		{Name: "x-ankusa-tenant", Value: "spoofed"}, {Name: "connection", Value: "close"}, {Name: "expect", Value: "100-continue"},
		{Name: "content-type", Value: "text/evil"}, {Name: "x-github-event", Value: "push"},
		{Name: "x-multi", Value: "1"}, {Name: "x-multi", Value: "2"}, {Name: "bad header", Value: "dropped"},
	}
	run := func(opts map[string]any) http.Header {
		t.Helper()
		e := sinktest.Envelope([]byte("h"))
		e.Headers = stored
		if err := deliver(t, newSink(t, opts), e); err != nil {
			t.Fatal(err)
		}
		reqs := rec.requests()
		h := reqs[len(reqs)-1].Header
		if h.Get("X-Ankusa-Id") != e.IDText || h.Get("X-Ankusa-Tenant") != "acme" || h.Get("Content-Type") != e.ContentType {
			t.Fatalf("a provider header replaced the sink's own: %v", h)
		}
		return h
	}
	h := run(map[string]any{"url": rec.srv.URL})
	for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "Expect"} {
		if v := h.Values(k); len(v) > 0 {
			t.Errorf("default filter forwarded %s", k)
		}
	}
	if h.Get("X-Github-Event") != "push" || strings.Join(h.Values("X-Multi"), ",") != "1,2" {
		t.Errorf("default filter lost provider headers: %v", h)
	}

	h = run(map[string]any{"url": rec.srv.URL, "forward_headers": []any{"X-Multi", "authorization", "x-ankusa-id"}})
	if h.Get("X-Github-Event") != "" || strings.Join(h.Values("X-Multi"), ",") != "1,2" || h.Get("Authorization") != "Bearer provider" {
		t.Errorf("allow list not applied: %v", h)
	}
}

// Inventory D.2 `timeout_ms`; design §6: the attempt deadline ends the attempt, which is retried.
func TestTimeoutIsTransient(t *testing.T) {
	release := make(chan struct{})
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	for name, c := range map[string]struct {
		opts map[string]any
		ctx  time.Duration
	}{
		"timeout_ms":       {map[string]any{"url": rec.srv.URL, "timeout_ms": 100}, 20 * time.Second},
		"attempt deadline": {map[string]any{"url": rec.srv.URL}, 100 * time.Millisecond},
	} {
		s := newSink(t, c.opts)
		ctx, cancel := context.WithTimeout(context.Background(), c.ctx)
		start := time.Now()
		err := s.Deliver(ctx, sinktest.Envelope([]byte("slow")))
		cancel()
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("%s: Deliver took %s", name, el)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: err = %v, want a deadline error", name, err)
		}
		if cl, _ := sinks.Classify(err); cl != sinks.Transient {
			t.Fatalf("%s: classified %s, want transient", name, cl)
		}
	}
}

// STYLE Config: "secrets are never logged or printed" — a transport error names the target without its
// query or user info.
func TestTransportErrorHidesURLSecrets(t *testing.T) {
	u := strings.Replace(closedURL(t), "http://", "http://user:pa55word@", 1) + "?token=t0ps3cret"
	err := deliver(t, newSink(t, map[string]any{"url": u}), sinktest.Envelope([]byte("x")))
	if err == nil {
		t.Fatal("delivery to a closed port succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, "t0ps3cret") || strings.Contains(msg, "pa55word") {
		t.Fatalf("error leaks a URL secret: %s", msg)
	}
	if cl, _ := sinks.Classify(err); cl != sinks.Transient {
		t.Fatalf("connection refused classified %s", cl)
	}
}

// Factory validation names the option and never echoes a value (options hold secrets).
func TestOptionsAreValidated(t *testing.T) {
	const secretish = "s3cr3t-value"
	f := func(opts map[string]any, want ...string) {
		t.Helper()
		_, err := New(config.SinkSpec{Type: Type, Options: opts}, sinks.Deps{})
		if err == nil {
			t.Fatalf("options %v accepted", keys(opts))
		}
		if !errors.Is(err, sinks.ErrInvalidOption) {
			t.Fatalf("err = %v, want ErrInvalidOption", err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("err = %q, want it to contain %q", err, w)
			}
		}
		if strings.Contains(err.Error(), secretish) {
			t.Fatalf("err echoes a value: %q", err)
		}
	}
	ok := "https://example.com/h"
	f(map[string]any{}, "http sink: url: is required")
	f(map[string]any{"url": "/relative/" + secretish}, "http sink: url: must be an absolute http(s) URL")
	f(map[string]any{"url": "ftp://example.com/" + secretish}, "http sink: url: must be an absolute http(s) URL")
	f(map[string]any{"url": 5}, "http sink: url: must be a string")
	f(map[string]any{"url": ok, "method": "get"}, "http sink: method: must be one of post|put|patch")
	f(map[string]any{"url": ok, "timeout_ms": 0}, "http sink: timeout_ms: must be in 1..")
	f(map[string]any{"url": ok, "timeout_ms": 1.5}, "http sink: timeout_ms: must be an integer")
	f(map[string]any{"url": ok, "max_response_bytes": -1}, "http sink: max_response_bytes")
	f(map[string]any{"url": ok, "secret": "whsec_" + secretish + "!"}, "http sink: secret: must be whsec_<base64>")
	f(map[string]any{"url": ok, "secret": []any{whsec("k"), secretish + "%"}}, "http sink: secret[1]: must be whsec_<base64>")
	f(map[string]any{"url": ok, "secret": []any{}}, "http sink: secret: must not be an empty list")
	f(map[string]any{"url": ok, "headers": map[string]any{"X-Ankusa-Id": secretish}}, "http sink: headers.X-Ankusa-Id: is set by the sink")
	f(map[string]any{"url": ok, "headers": map[string]any{"Content-Type": secretish}}, "headers.Content-Type")
	f(map[string]any{"url": ok, "headers": map[string]any{"X-Bad": secretish + "\r\nInjected: 1"}}, "headers.X-Bad: value holds a control character")
	f(map[string]any{"url": ok, "headers": map[string]any{"X-N": 5}}, "headers.X-N: must be a string")
	f(map[string]any{"url": ok, "headers": []any{secretish}}, "http sink: headers: must be a mapping")
	f(map[string]any{"url": ok, "forward_headers": []any{"bad name"}}, "http sink: forward_headers")
	f(map[string]any{"url": ok, "sekret": secretish}, "http sink: sekret: unknown option")
	// Every problem at once.
	f(map[string]any{"method": "get", "timeout_ms": -1}, "url: is required", "method:", "timeout_ms:")

	_, err := New(config.SinkSpec{Type: Type, Options: map[string]any{"url": ok, "method": "Patch", "timeout_ms": 2500.0,
		"secret": whsec("k"), "max_response_bytes": 0, "forward_headers": []any{}, "timeout": nil}}, sinks.Deps{})
	if err == nil || !strings.Contains(err.Error(), "timeout: unknown option") {
		t.Fatalf("a nil-valued unknown key: err = %v", err)
	}
	s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{"url": ok, "method": "Patch", "timeout_ms": 2500.0,
		"secret": whsec("k"), "max_response_bytes": 0, "forward_headers": []any{}}}, sinks.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hs := s.(*sink)
	if hs.method != "PATCH" || hs.timeout != 2500*time.Millisecond || hs.maxResp != 0 || hs.forward == nil || !s.Durable() {
		t.Fatalf("parsed settings = %+v", hs.settings)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, s := range []string{"", "0", "120", "99999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", " 5 ", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseRetryAfter(v, now)
		if d < 0 || d > sinks.MaxRetryAfter || (!ok && d != 0) {
			t.Fatalf("parseRetryAfter(%q) = %s, %v", v, d, ok)
		}
	})
}

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A request whose body is at most gatherMax leaves in one write (one syscall, where the buffered writer on the
// socket took two for a 10 KiB body); a bigger one is streamed. Whichever way a request went, every body
// arrives whole and the connection carries the next request, of either kind.
func TestRequestIsSentInOneWriteUpToGatherMax(t *testing.T) {
	rec := newRecorder(t, nil)
	s := newSink(t, map[string]any{"url": rec.srv.URL})
	var writes atomic.Int32
	pool := s.(*sink).pool
	dial := pool.dial
	pool.dial = func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &writes}, nil
	}
	for _, n := range []int{100, 10 << 10, gatherMax, gatherMax + 1, 200 << 10, 100, bufSize - 200, 10 << 10} {
		e := sinktest.Envelope(sinktest.Binary(n))
		before := writes.Load()
		if err := deliver(t, s, e); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if got := rec.body(e.Text()); !bytes.Equal(got, e.Body) {
			t.Fatalf("%d bytes: the destination got %d bytes, not the body", n, len(got))
		}
		w := writes.Load() - before
		if n <= gatherMax && w != 1 {
			t.Fatalf("a request with a %d-byte body took %d writes, want 1", n, w)
		}
		if n > gatherMax && w < 2 {
			t.Fatalf("a request with a %d-byte body took %d writes: it was not streamed", n, w)
		}
	}
	if n := rec.conns.Load(); n != 1 {
		t.Fatalf("sequential deliveries opened %d connections, want 1", n)
	}
}
