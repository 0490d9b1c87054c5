package httpsink

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpproxy"

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
	isTLS := st.url.Scheme == "https"
	port := st.url.Port()
	if port == "" {
		port = "80"
		if isTLS {
			port = "443"
		}
	}
	tpl := &fasthttp.URI{DisablePathNormalizing: true}
	if err := tpl.Parse(nil, []byte(st.url.String())); err != nil {
		return nil, &sinks.OptionError{Sink: Type, Option: "url", Msg: "must be an absolute http(s) URL"}
	}
	pool := &connPool{addr: net.JoinHostPort(st.url.Hostname(), port)}
	if isTLS {
		pool.tls = &tls.Config{ServerName: st.url.Hostname(), MinVersion: tls.VersionTLS12}
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	pool.dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	// The proxy of the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), as net/http's ProxyFromEnvironment
	// decides it, reached through a CONNECT tunnel.
	if pu, err := http.ProxyFromEnvironment(&http.Request{URL: st.url}); err == nil && pu != nil {
		viaProxy, err := (&fasthttpproxy.Dialer{Timeout: 30 * time.Second}).GetDialFuncForTLS(true, isTLS)
		if err != nil {
			return nil, &sinks.OptionError{Sink: Type, Option: "url", Msg: "the proxy of the environment cannot be used"}
		}
		pool.dial = func(_ context.Context, addr string) (net.Conn, error) { return viaProxy(addr) }
	}
	return &sink{settings: st, uri: tpl, pool: pool, now: time.Now}, nil
}

// sink writes each request and reads its answer on the attempt's own goroutine, over a keep-alive connection
// of its pool, with fasthttp's request and response objects taken from their pools and reused: an attempt
// allocates almost nothing. BenchmarkClientPOST is the measurement behind it: fasthttp's client needs no
// allocation and about half the time per POST of net/http, which builds a request per POST and hands it to
// two goroutines per connection.
type sink struct {
	settings
	uri    *fasthttp.URI // the parsed url, copied into each request
	pool   *connPool
	now    func() time.Time
	closed atomic.Bool
}

func (s *sink) Durable() bool { return true }

// Close drops idle connections; in-flight attempts finish on their own connections, which are closed after.
func (s *sink) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.close()
	}
	return nil
}

func (s *sink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	_, err := s.DeliverAnswered(ctx, e)
	return err
}

// DeliverAnswered is Deliver that also returns the status the destination answered (sinks.Answerer).
func (s *sink) DeliverAnswered(ctx context.Context, e *sinks.Envelope) (int, error) {
	if s.closed.Load() {
		return 0, sinks.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("httpsink: cannot deliver to %s: %w", s.target, err)
	}
	// The sink's timeout bounds the attempt as the connection's deadline (and a dial's context), not as a
	// context of its own: that cost a timer, a cancel context and its propagation on every attempt.
	dl := time.Now().Add(s.timeout)
	if pd, ok := ctx.Deadline(); ok && pd.Before(dl) {
		dl = pd
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer func() {
		fasthttp.ReleaseRequest(req) // the body is the caller's again once Deliver returns: nothing holds it
		fasthttp.ReleaseResponse(resp)
	}()
	if err := s.request(req, e); err != nil {
		return 0, err
	}
	err := s.roundTrip(ctx, dl, req, resp)
	if err == nil {
		return resp.StatusCode(), s.answer(resp)
	}
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		err = ctx.Err() // the deadline (or the caller's cancellation) cut the connection short
	case errors.Is(err, fasthttp.ErrTimeout), errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		err = context.DeadlineExceeded // the connection's (or the dial's) deadline fired
	}
	return 0, fmt.Errorf("httpsink: cannot deliver to %s: %w", s.target, err)
}

// roundTrip sends req and reads the answer's header and up to max_response_bytes of its body into resp. A
// connection from the pool that fails before any answer (the destination closed it while idle) is replaced by
// a new one once, as net/http does.
func (s *sink) roundTrip(ctx context.Context, dl time.Time, req *fasthttp.Request, resp *fasthttp.Response) error {
	for {
		c, err := s.pool.get(ctx, dl, s.now())
		if err != nil {
			return err
		}
		answered, err := s.exchange(ctx, dl, c, req, resp)
		if err == nil || answered || !c.reused || ctx.Err() != nil {
			return err
		}
		resp.Reset()
	}
}

// exchange runs one request on c and gives c back to the pool or closes it; answered tells whether a response
// header was read.
func (s *sink) exchange(ctx context.Context, dl time.Time, c *conn, req *fasthttp.Request, resp *fasthttp.Response) (answered bool, err error) {
	// A cancellation or the deadline interrupts the blocked read or write at once.
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	reusable := false
	defer func() {
		if stop() && reusable && !s.closed.Load() {
			s.pool.put(c, s.now())
		} else {
			s.pool.drop(c)
		}
	}()
	if err := c.c.SetDeadline(dl); err != nil {
		return false, err
	}
	if err := c.send(req); err != nil {
		return false, err
	}
	if err := resp.Header.Read(c.br); err != nil {
		return false, err
	}
	code := resp.StatusCode()
	switch {
	case code == fasthttp.StatusNoContent || code == fasthttp.StatusNotModified || code < 200:
		reusable = !resp.ConnectionClose() // an answer without a body (RFC 9112 §6.3)
	case s.maxResp == 0:
		// Nothing of the answer is read: the connection is kept only when there is nothing to read.
		reusable = resp.Header.ContentLength() == 0 && !resp.ConnectionClose()
	default:
		// fasthttp reads a body above the bound only to the bound and fails; the answer stands, the
		// connection goes.
		berr := resp.ReadBody(c.br, int(s.maxResp))
		reusable = berr == nil && !resp.ConnectionClose()
	}
	return true, nil
}

// request builds the attempt's request into req. A request that cannot be built is a Permanent error: the same
// hook would fail the same way on every retry.
func (s *sink) request(req *fasthttp.Request, e *sinks.Envelope) error {
	h := &req.Header
	h.SetNoDefaultContentType(true)
	h.SetMethod(s.method)
	req.SetURI(s.uri)
	add := func(name, value string) error {
		if err := checkField(name, value); err != nil {
			return sinks.Permanent(err)
		}
		h.Add(name, value)
		return nil
	}
	// Proxy headers pass here: whether a source forwards them is its own policy (forward_proxy_headers),
	// which dispatch applied when it built the envelope. Configured headers win over forwarded ones.
	for _, fh := range (sinks.Forward{Allow: s.forward, Proxy: true}).Headers(e.Headers) {
		if validName(fh.Name) && validValue(fh.Value) && !s.isStatic(fh.Name) {
			h.Add(fh.Name, fh.Value)
		}
	}
	for _, sh := range s.static {
		if err := add(sh.name, sh.value); err != nil {
			return err
		}
	}
	// Every value taken from the hook goes through sinks.HeaderValue: a dedupe key or a URL tenant may hold
	// bytes no header can carry, and such a request would fail every attempt.
	id := e.Text()
	if e.ContentType != "" {
		h.SetContentType(sinks.HeaderValue(e.ContentType))
	}
	h.Set("X-Ankusa-Id", id)
	h.Set("X-Ankusa-Source", sinks.HeaderValue(e.Source))
	if e.Tenant != "" {
		h.Set("X-Ankusa-Tenant", sinks.HeaderValue(e.Tenant))
	}
	h.Set("X-Ankusa-Idempotency-Key", sinks.HeaderValue(e.IdempotencyKey()))
	if e.DedupeKey != "" {
		h.Set("X-Ankusa-Dedupe-Key", sinks.HeaderValue(e.DedupeKey))
	}
	if e.ReplayID != "" {
		h.Set("X-Ankusa-Replay-Id", sinks.HeaderValue(e.ReplayID))
	}
	if e.Verification != "" {
		h.Set("X-Ankusa-Verification", sinks.HeaderValue(e.Verification))
	}
	if len(s.secrets) > 0 {
		ts := strconv.FormatInt(s.now().Unix(), 10)
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", ts)
		h.Set("Webhook-Signature", sign(s.secrets, id, ts, e.Body))
	}
	// The body is not copied: it is written on this goroutine, before Deliver returns.
	req.SetBodyRaw(e.Body)
	return nil
}

// isStatic tells whether a configured header has the (case-insensitive) name n.
func (s *sink) isStatic(n string) bool {
	for _, sh := range s.static {
		if strings.EqualFold(sh.name, n) {
			return true
		}
	}
	return false
}

// checkHeader refuses what Go's transport would refuse on every attempt: a name that is not a token or a value
// with a control character. It names the header, never its value.
func checkHeader(h http.Header) error {
	for name, values := range h {
		for _, v := range values {
			if err := checkField(name, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkField is checkHeader for one field.
func checkField(name, value string) error {
	if !validName(name) {
		return errUnbuildable
	}
	if !validValue(value) {
		return fmt.Errorf("%w: header %s holds a byte HTTP cannot carry", errUnbuildable, name)
	}
	return nil
}

// answer maps the response to the sink's result (inventory D.2 "Permanent failures" column); resp holds at
// most max_response_bytes of the answer's body.
func (s *sink) answer(resp *fasthttp.Response) error {
	code := resp.StatusCode()
	if code >= 200 && code < 300 {
		return nil
	}
	body := resp.Body()
	body = body[:min(len(body), snippetBytes)]
	return classify(code, string(resp.Header.Peek("Retry-After")), s.now(), &StatusError{Code: code, Body: strings.TrimSpace(string(body))})
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
