// Package httpsink delivers hooks by HTTP request (sink type "http", inventory D.2 and D.3).
//
// Invariant: Deliver returns nil only for a 2xx answer to the request carrying the hook's body verbatim.
// Everything else is an error classified for the caller: 400/401/403/404/410/413/422 and other 4xx are
// Permanent; 408, 429 and 5xx are RetryAfter when the destination sent Retry-After (seconds or HTTP date,
// capped at one hour), else Transient; a 3xx is Transient ("redirect not followed" — redirects are never
// followed, so a hook never lands somewhere the operator did not configure); transport errors and the attempt
// deadline are Transient.
//
// The request: method post|put|patch, Content-Type = the hook's, x-ankusa-id, x-ankusa-source,
// x-ankusa-tenant (when set), x-ankusa-idempotency-key, x-ankusa-dedupe-key, x-ankusa-replay-id and
// x-ankusa-verification (when set), the forwarded provider headers (sinks.ForwardedHeaders), the configured
// static headers, and with `secret` the Standard Webhooks signature headers webhook-id, webhook-timestamp and
// webhook-signature ("v1,<base64 HMAC-SHA256(id.timestamp.body)>", one entry per secret, space-separated).
//
// Each sink keeps a pool of keep-alive connections to its destination (conns.go, no goroutine of its own) and
// writes each request and reads its answer on the attempt's goroutine with fasthttp's pooled request and response
// objects, the body written from the caller's buffer before Deliver returns (nothing reads it after): a request
// with a body of up to 16 KiB is gathered and sent in one write, a bigger one streamed in 8 KiB writes.
// BenchmarkClientPOST measured the choice: net/http took about twice the time and 49 allocations per POST against
// fasthttp's none. The response body is read up to max_response_bytes; an answer left longer closes its
// connection, so a destination cannot make an attempt read without bound. The attempt's deadline and a
// cancellation of its context cut the connection at once.
package httpsink
