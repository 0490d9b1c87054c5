package httpsink

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// snippetBytes is how much of an error answer's body is kept for the dead-letter reason.
const snippetBytes = 256

// Register adds the http sink to r.
func Register(r *sinks.Registry) { r.Register(Type, New) }

// New builds an http sink from its config entry (a sinks.Factory).
func New(spec config.SinkSpec, deps sinks.Deps) (sinks.Sink, error) {
	st, err := parse(spec)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64, // lanes run attempts concurrently against one host; keep their connections warm
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // the answer is discarded: asking for gzip only costs CPU
	}
	return &sink{
		settings:  st,
		transport: tr,
		client: &http.Client{
			Transport: tr,
			// Never follow: a redirect would deliver the hook somewhere the operator did not configure.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: time.Now,
	}, nil
}

type sink struct {
	settings
	transport *http.Transport
	client    *http.Client
	now       func() time.Time
	closed    atomic.Bool
}

func (s *sink) Durable() bool { return true }

// Close drops idle connections; in-flight attempts finish on their own connections.
func (s *sink) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.transport.CloseIdleConnections()
	}
	return nil
}

func (s *sink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	if s.closed.Load() {
		return sinks.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	g := &bodyGuard{b: e.Body}
	defer g.release()
	defer func() {
		if s.closed.Load() { // closed mid-attempt: do not leave this attempt's connection idling
			s.transport.CloseIdleConnections()
		}
	}()
	req, err := s.request(ctx, e, g)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error prints the whole URL, query included; name the target instead
		}
		return fmt.Errorf("httpsink: cannot deliver to %s: %w", s.target, err)
	}
	defer resp.Body.Close()
	return s.answer(resp)
}

// request builds the attempt's request. The URL is copied so concurrent attempts share nothing mutable. A
// request that cannot be built is a Permanent error: the same hook would fail the same way on every retry.
func (s *sink) request(ctx context.Context, e *sinks.Envelope, g *bodyGuard) (*http.Request, error) {
	u := *s.url
	h := make(http.Header, 8+len(e.Headers)+len(s.static))
	// Proxy headers pass here: whether a source forwards them is its own policy (forward_proxy_headers),
	// which dispatch applied when it built the envelope.
	for _, fh := range (sinks.Forward{Allow: s.forward, Proxy: true}).Headers(e.Headers) {
		if validName(fh.Name) && validValue(fh.Value) {
			k := http.CanonicalHeaderKey(fh.Name)
			h[k] = append(h[k], fh.Value)
		}
	}
	for _, sh := range s.static { // configured headers win over forwarded ones
		h[sh.name] = []string{sh.value}
	}
	// Every value taken from the hook goes through sinks.HeaderValue: a dedupe key or a URL tenant may hold
	// bytes no header can carry, and such a request would fail every attempt.
	id := e.Text()
	if e.ContentType != "" {
		h["Content-Type"] = []string{sinks.HeaderValue(e.ContentType)}
	}
	h["X-Ankusa-Id"] = []string{id}
	h["X-Ankusa-Source"] = []string{sinks.HeaderValue(e.Source)}
	if e.Tenant != "" {
		h["X-Ankusa-Tenant"] = []string{sinks.HeaderValue(e.Tenant)}
	}
	h["X-Ankusa-Idempotency-Key"] = []string{sinks.HeaderValue(e.IdempotencyKey())}
	if e.DedupeKey != "" {
		h["X-Ankusa-Dedupe-Key"] = []string{sinks.HeaderValue(e.DedupeKey)}
	}
	if e.ReplayID != "" {
		h["X-Ankusa-Replay-Id"] = []string{sinks.HeaderValue(e.ReplayID)}
	}
	if e.Verification != "" {
		h["X-Ankusa-Verification"] = []string{sinks.HeaderValue(e.Verification)}
	}
	if len(s.secrets) > 0 {
		ts := strconv.FormatInt(s.now().Unix(), 10)
		h["Webhook-Id"] = []string{id}
		h["Webhook-Timestamp"] = []string{ts}
		h["Webhook-Signature"] = []string{sign(s.secrets, id, ts, e.Body)}
	}

	req := &http.Request{
		Method:     s.method,
		URL:        &u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       u.Host,
	}
	if len(e.Body) == 0 {
		req.Body = http.NoBody
		req.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	} else {
		req.ContentLength = int64(len(e.Body))
		req.Body = &bodyReader{g: g}
		// GetBody lets the transport resend on a kept-alive connection the server closed before reading.
		req.GetBody = func() (io.ReadCloser, error) { return &bodyReader{g: g}, nil }
	}
	if err := checkHeader(h); err != nil {
		return nil, sinks.Permanent(err)
	}
	return req.WithContext(ctx), nil
}

// checkHeader refuses what Go's transport would refuse on every attempt: a name that is not a token or a value
// with a control character. It names the header, never its value.
func checkHeader(h http.Header) error {
	for name, values := range h {
		if !validName(name) {
			return errUnbuildable
		}
		for _, v := range values {
			if !validValue(v) {
				return fmt.Errorf("%w: header %s holds a byte HTTP cannot carry", errUnbuildable, name)
			}
		}
	}
	return nil
}

// answer maps the response to the sink's result (inventory D.2 "Permanent failures" column) after reading at
// most max_response_bytes of its body.
func (s *sink) answer(resp *http.Response) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		_, _ = io.CopyN(io.Discard, resp.Body, s.maxResp) // lets the connection be reused when the body is short
		return nil
	}
	var buf [snippetBytes]byte
	n, _ := io.ReadFull(io.LimitReader(resp.Body, min(s.maxResp, snippetBytes)), buf[:])
	if rest := s.maxResp - int64(n); rest > 0 {
		_, _ = io.CopyN(io.Discard, resp.Body, rest)
	}
	return classify(code, resp.Header.Get("Retry-After"), s.now(), &StatusError{Code: code, Body: strings.TrimSpace(string(buf[:n]))})
}

// classify implements the status mapping; se describes the answer.
func classify(code int, retryAfter string, now time.Time, se *StatusError) error {
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500 && code < 600:
		if d, ok := parseRetryAfter(retryAfter, now); ok {
			return sinks.RetryAfter(d, se)
		}
		return se
	case code >= 400 && code < 500:
		// 400/401/403/404/410/413/422 by name in the inventory; any other 4xx is the destination refusing this
		// request for what it is, which a retry cannot change either.
		return sinks.Permanent(se)
	default: // 3xx (ErrRedirect), and codes outside the standard ranges
		return se
	}
}

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3). A date in the past is
// a zero delay, any delay is capped at sinks.MaxRetryAfter, and an unreadable value is ignored (the attempt is
// then plain Transient).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			var ne *strconv.NumError
			if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
				return sinks.MaxRetryAfter, true
			}
			return 0, false
		}
		if n > uint64(sinks.MaxRetryAfter/time.Second) {
			return sinks.MaxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), sinks.MaxRetryAfter), true
}

// sign computes the Standard Webhooks signature header: "v1,<base64 HMAC-SHA256(id.ts.body)>" per secret,
// space-separated, so a receiver rotating secrets accepts either.
func sign(secrets [][]byte, id, ts string, body []byte) string {
	prefix := make([]byte, 0, len(id)+len(ts)+2)
	prefix = append(append(append(append(prefix, id...), '.'), ts...), '.')
	var b strings.Builder
	b.Grow(len(secrets) * 48)
	var sum [sha256.Size]byte
	var enc [44]byte // base64 of 32 bytes
	for i, key := range secrets {
		mac := hmac.New(sha256.New, key)
		mac.Write(prefix)
		mac.Write(body)
		base64.StdEncoding.Encode(enc[:], mac.Sum(sum[:0]))
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.Write(enc[:])
	}
	return b.String()
}

// bodyGuard lends the hook's body to the transport until Deliver returns. net/http may still read a request
// body after RoundTrip returned (e.g. the server answered before reading it all); after release such a read
// fails instead of racing with the caller reusing the buffer.
type bodyGuard struct {
	mu sync.Mutex
	b  []byte
}

func (g *bodyGuard) release() {
	g.mu.Lock()
	g.b = nil
	g.mu.Unlock()
}

type bodyReader struct {
	g   *bodyGuard
	off int
}

func (r *bodyReader) Read(p []byte) (int, error) {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	if r.g.b == nil {
		return 0, errBodyReleased
	}
	if r.off >= len(r.g.b) {
		return 0, io.EOF
	}
	n := copy(p, r.g.b[r.off:])
	r.off += n
	return n, nil
}

func (r *bodyReader) Close() error { return nil }
