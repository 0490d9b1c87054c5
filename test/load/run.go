package load

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// maxResponseBody bounds what is read of a response: acks and refusals are small,
// and a misbehaving target must not make the driver buffer without limit.
const maxResponseBody = 1 << 20

// run is the state the workers of one Run share: read-only after start except for
// the ticket counter.
type run struct {
	o        Options
	t        target
	start    time.Time
	interval float64 // open loop: nanoseconds between due times; 0 in the closed loop
	end      time.Time
	done     chan struct{} // closed when the run must stop: ctx, Duration, or all workers finished
	tickets  atomic.Int64  // requests claimed so far; ticket n is the n-th request
}

// Run drives load at o.URL until o.Requests were sent, o.Duration passed or ctx is
// cancelled, waits for the requests in flight (each bounded by Timeout), and returns
// what it saw. It returns an error only when it could not start (bad options); a
// target that refuses or drops connections is counted in Report.Errors and the
// worker goes on with its next request on a new connection.
func Run(ctx context.Context, o Options) (Report, error) {
	o, t, err := o.withDefaults()
	if err != nil {
		return Report{}, err
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return Report{}, fmt.Errorf("load: cannot draw a body nonce: %w", err)
	}
	r := &run{o: o, t: t, done: make(chan struct{})}
	if o.Rate > 0 {
		r.interval = float64(time.Second) / o.Rate
	}
	workers := make([]*worker, o.Workers)
	for i := range workers {
		workers[i] = newWorker(r, nonce[:])
	}
	defer func() {
		for _, w := range workers {
			w.release()
		}
	}()

	r.start = time.Now()
	if o.Duration > 0 {
		r.end = r.start.Add(o.Duration)
	}
	finished := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		var deadline <-chan time.Time
		if o.Duration > 0 {
			tm := time.NewTimer(o.Duration)
			defer tm.Stop()
			deadline = tm.C
		}
		select {
		case <-ctx.Done():
		case <-deadline:
		case <-finished:
		}
		close(r.done)
	}()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop()
		}()
	}
	wg.Wait()
	elapsed := time.Since(r.start)
	close(finished)
	<-watcherDone
	return r.report(workers, elapsed), nil
}

// Measure runs a one-second warm-up at url with o's shape, discards it, then runs o
// at url and returns that run's report. Hooks accepted during the warm-up are still
// passed to o.OnAccepted: they are acknowledged all the same.
func Measure(ctx context.Context, url string, o Options) (Report, error) {
	o.URL = url
	warm := o
	warm.Requests, warm.Duration = 0, time.Second
	if _, err := Run(ctx, warm); err != nil {
		return Report{}, fmt.Errorf("load: cannot warm up: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Report{}, fmt.Errorf("load: cancelled during warm-up: %w", err)
	}
	return Run(ctx, o)
}

func (r *run) stopped() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *run) report(workers []*worker, elapsed time.Duration) Report {
	rep := Report{StatusCounts: map[int]int64{}, Elapsed: elapsed}
	var h, late histogram
	for _, w := range workers {
		rep.Sent += w.sent
		rep.Accepted += w.accepted
		rep.Duplicates += w.duplicates
		rep.Errors += w.errors
		for code, n := range w.status {
			if n > 0 {
				rep.StatusCounts[code] += n
			}
		}
		h.merge(&w.hist)
		late.merge(&w.late)
	}
	rep.Shed = rep.StatusCounts[fasthttp.StatusServiceUnavailable]
	rep.RateLimited = rep.StatusCounts[fasthttp.StatusTooManyRequests]
	rep.P50, rep.P90, rep.P99, rep.P999 = h.quantile(0.50), h.quantile(0.90), h.quantile(0.99), h.quantile(0.999)
	rep.Max = time.Duration(h.max)
	if r.interval > 0 {
		rep.LateP99 = late.quantile(0.99)
	}
	if elapsed > 0 {
		rep.AcceptedPerSec = float64(rep.Accepted) / elapsed.Seconds()
	}
	return rep
}

// worker owns one connection and everything one request needs, so the request loop
// shares nothing with other workers but the ticket counter.
type worker struct {
	r     *run
	conn  net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	req   *fasthttp.Request
	resp  *fasthttp.Response
	body  []byte
	seqAt int // offset of the 16 hex digits of the request number in body
	timer *time.Timer
	// failures counts consecutive transport errors, for the reconnect back-off.
	failures int

	sent, accepted, duplicates, errors int64
	status                             [600]int64
	hist                               histogram
	late                               histogram // open loop: send time - due time, every request
}

func newWorker(r *run, nonce []byte) *worker {
	w := &worker{
		r:     r,
		req:   fasthttp.AcquireRequest(),
		resp:  fasthttp.AcquireResponse(),
		timer: time.NewTimer(time.Hour),
	}
	w.timer.Stop()
	w.body, w.seqAt = makeBody(r.o.BodyBytes, nonce)

	// Host and request URI are set on the header directly so Request.Write does not
	// re-derive them from a parsed URI on every call.
	h := &w.req.Header
	h.SetMethod(fasthttp.MethodPost)
	h.SetRequestURI(r.t.requestURI)
	h.SetHost(r.t.hostHeader)
	h.SetContentType("application/json")
	for k, v := range r.o.Headers {
		if strings.EqualFold(k, "Host") {
			h.SetHost(v)
			continue
		}
		h.Set(k, v)
	}
	// The body is rewritten in place before each request; SetBodyRaw keeps the slice.
	w.req.SetBodyRaw(w.body)
	return w
}

func (w *worker) release() {
	w.closeConn()
	fasthttp.ReleaseRequest(w.req)
	fasthttp.ReleaseResponse(w.resp)
}

func (w *worker) loop() {
	defer w.closeConn()
	o := &w.r.o
	for !w.r.stopped() {
		n := w.r.tickets.Add(1)
		if o.Requests > 0 && n > int64(o.Requests) {
			return
		}
		var due time.Time
		if w.r.interval > 0 {
			due = w.r.start.Add(time.Duration(float64(n-1) * w.r.interval))
			if !w.r.end.IsZero() && !due.Before(w.r.end) {
				return
			}
			if !w.sleepUntil(due) {
				return
			}
		} else {
			due = time.Now()
		}
		w.do(n, due)
	}
}

// sleepUntil waits for t or for the run to stop; it reports whether to go on.
func (w *worker) sleepUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return !w.r.stopped()
	}
	w.timer.Reset(d)
	select {
	case <-w.timer.C:
		return true
	case <-w.r.done:
		w.timer.Stop()
		return false
	}
}

// do sends request n, due at due, and counts its outcome.
func (w *worker) do(n int64, due time.Time) {
	putHex16(w.body[w.seqAt:], uint64(n))
	w.sent++
	if w.r.interval > 0 {
		w.late.record(time.Since(due))
	}
	if err := w.roundTrip(); err != nil {
		w.transportError()
		return
	}
	w.failures = 0
	lat := time.Since(due)
	code := w.resp.StatusCode()
	if w.resp.ConnectionClose() {
		w.closeConn()
	}
	if code >= 100 && code < len(w.status) {
		w.status[code]++
	}
	if code != fasthttp.StatusCreated {
		if code != fasthttp.StatusServiceUnavailable && code != fasthttp.StatusTooManyRequests {
			w.errors++
		}
		return
	}
	id, dup, ok := parseAck(w.resp.Body())
	if !ok {
		w.errors++
		return
	}
	w.accepted++
	if dup {
		w.duplicates++
	}
	w.hist.record(lat)
	if w.r.o.OnAccepted != nil || w.r.o.OnAcked != nil {
		ids := string(id)
		if w.r.o.OnAccepted != nil {
			w.r.o.OnAccepted(ids, w.body)
		}
		if w.r.o.OnAcked != nil {
			w.r.o.OnAcked(ids, due)
		}
	}
}

func (w *worker) roundTrip() error {
	if w.conn == nil {
		if err := w.dial(); err != nil {
			return err
		}
	}
	if err := w.conn.SetDeadline(time.Now().Add(w.r.o.Timeout)); err != nil {
		return fmt.Errorf("cannot set deadline: %w", err)
	}
	if err := w.req.Write(w.bw); err != nil {
		return fmt.Errorf("cannot write request: %w", err)
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("cannot send request: %w", err)
	}
	if err := w.resp.ReadLimitBody(w.br, maxResponseBody); err != nil {
		return fmt.Errorf("cannot read response: %w", err)
	}
	return nil
}

func (w *worker) dial() error {
	d := net.Dialer{Timeout: w.r.o.Timeout}
	c, err := d.Dial("tcp", w.r.t.addr)
	if err != nil {
		return fmt.Errorf("cannot dial %s: %w", w.r.t.addr, err)
	}
	if w.r.t.tls {
		tc := tls.Client(c, &tls.Config{ServerName: w.r.t.host, MinVersion: tls.VersionTLS12})
		_ = tc.SetDeadline(time.Now().Add(w.r.o.Timeout))
		if err := tc.Handshake(); err != nil {
			_ = c.Close()
			return fmt.Errorf("cannot handshake with %s: %w", w.r.t.addr, err)
		}
		c = tc
	}
	w.conn = c
	if w.br == nil {
		w.br = bufio.NewReaderSize(c, 4096)
		w.bw = bufio.NewWriterSize(c, 4096+len(w.body))
	} else {
		w.br.Reset(c)
		w.bw.Reset(c)
	}
	return nil
}

func (w *worker) closeConn() {
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn = nil
	}
}

// transportError counts a request that got no response, drops the connection (a
// late response would otherwise be read as the next request's), and backs off when
// failures repeat so a dead target is probed, not spun on: the first retry is
// immediate (a server may just have closed an idle connection), then 10 ms doubling
// to 250 ms.
func (w *worker) transportError() {
	w.errors++
	w.closeConn()
	w.failures++
	if w.failures < 2 {
		return
	}
	d := 10 * time.Millisecond << min(w.failures-2, 5)
	if d > 250*time.Millisecond {
		d = 250 * time.Millisecond
	}
	w.sleepUntil(time.Now().Add(d))
}

// makeBody returns a JSON object of exactly size printable bytes (or the shortest
// such object when size is smaller) whose "load" field holds the run nonce and 16
// hex digits that do() overwrites with the request number, and the offset of those
// digits. The padding is random letters and digits, drawn once per worker.
func makeBody(size int, nonce []byte) ([]byte, int) {
	head := `{"load":"` + hex.EncodeToString(nonce) + "-"
	const seqDigits = 16
	mid := `","pad":"`
	tail := `"}`
	pad := size - len(head) - seqDigits - len(mid) - len(tail)
	if pad < 0 {
		pad = 0
	}
	b := make([]byte, 0, len(head)+seqDigits+len(mid)+pad+len(tail))
	b = append(b, head...)
	seqAt := len(b)
	b = append(b, "0000000000000000"...)
	b = append(b, mid...)
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	rnd := make([]byte, pad)
	_, _ = rand.Read(rnd) // crypto/rand.Read never fails
	for _, c := range rnd {
		b = append(b, alphabet[int(c)%len(alphabet)])
	}
	b = append(b, tail...)
	return b, seqAt
}

func putHex16(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		dst[i] = digits[v&0xf]
		v >>= 4
	}
}
