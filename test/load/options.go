package load

import (
	"fmt"
	"net"
	"net/url"
	"time"
)

// Options says what to send, how hard and for how long. The zero value of each
// optional field takes the default noted beside it.
type Options struct {
	// URL is the full URL to POST to, e.g. http://127.0.0.1:4000/webhooks/sample.
	URL string
	// Workers is the number of goroutines, each with its own keep-alive connection
	// (default 64). In the open loop it bounds the requests in flight.
	Workers int
	// Rate > 0 selects the open loop at this many requests per second; latency is
	// then measured from each request's due time (coordinated-omission aware).
	Rate float64
	// Requests stops the run after this many requests were sent (0 = no limit).
	Requests int
	// Duration stops the run after this long (0 = no limit). At least one of
	// Requests and Duration must be set. Requests in flight at the end are awaited.
	Duration time.Duration
	// BodyBytes is the body size (default 1024). Each body is a JSON object of
	// printable bytes whose first field is unique per request, so no two bodies of
	// any two runs are equal. A size below that field's length yields a longer body.
	BodyBytes int
	// Headers are added to every request; Content-Type defaults to application/json.
	Headers map[string]string
	// Timeout bounds each request (default 20s); a timed-out request counts as an
	// error and its connection is replaced.
	Timeout time.Duration
	// OnAccepted is called for every 201 with the hook id and the request body, from
	// the worker goroutine that received it, so it must be safe for concurrent use.
	// body is only valid during the call: the worker reuses it for its next request.
	OnAccepted func(id string, body []byte)
	// OnAcked, when set, is called for every 201 with the hook id and the time the request was due (open
	// loop) or sent (closed loop), from the worker goroutine that received it: Recorder.Acked measures
	// delivery latency from it.
	OnAcked func(id string, due time.Time)
}

const (
	defaultWorkers   = 64
	defaultBodyBytes = 1024
	defaultTimeout   = 20 * time.Second
)

// target is the parsed URL a worker dials.
type target struct {
	addr       string // host:port to dial
	tls        bool
	host       string // server name for TLS
	hostHeader string // Host header: host[:port] as written in the URL
	requestURI string // path and query
}

// withDefaults fills in the defaults and checks the options; it is the one place
// defaults are decided.
func (o Options) withDefaults() (Options, target, error) {
	if o.URL == "" {
		return o, target{}, ErrNoURL
	}
	if o.Workers < 0 || o.Rate < 0 || o.Requests < 0 || o.Duration < 0 || o.BodyBytes < 0 || o.Timeout < 0 {
		return o, target{}, ErrBadOptions
	}
	if o.Requests == 0 && o.Duration == 0 {
		return o, target{}, ErrUnbounded
	}
	if o.Workers == 0 {
		o.Workers = defaultWorkers
	}
	if o.Requests > 0 && o.Workers > o.Requests {
		o.Workers = o.Requests
	}
	if o.BodyBytes == 0 {
		o.BodyBytes = defaultBodyBytes
	}
	if o.Timeout == 0 {
		o.Timeout = defaultTimeout
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return o, target{}, fmt.Errorf("%w: %q: %v", ErrBadURL, o.URL, err)
	}
	var t target
	switch u.Scheme {
	case "http":
	case "https":
		t.tls = true
	default:
		return o, target{}, fmt.Errorf("%w: %q", ErrBadURL, o.URL)
	}
	if u.Host == "" {
		return o, target{}, fmt.Errorf("%w: %q", ErrBadURL, o.URL)
	}
	t.host = u.Hostname()
	port := u.Port()
	if port == "" {
		port = "80"
		if t.tls {
			port = "443"
		}
	}
	t.addr = net.JoinHostPort(t.host, port)
	t.hostHeader = u.Host
	t.requestURI = u.RequestURI()
	return o, t, nil
}
