package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/valyala/fasthttp"
)

// fate is what the scripted target does with request n (the number the driver
// writes into each body), so a test can compute every expected count exactly.
func fate(n uint64) string {
	switch n % 10 {
	case 3:
		return "shed" // 503 with Retry-After
	case 5:
		return "limited" // 429
	case 7:
		return "drop" // connection closed, no response
	case 9:
		return "bad" // 400 refusal
	}
	if n%4 == 0 {
		return "dup" // 201 duplicate
	}
	return "ok" // 201
}

// seqOf reads the request number from a body the driver built.
func seqOf(t testing.TB, body []byte) uint64 {
	var b struct{ Load string }
	if err := json.Unmarshal(body, &b); err != nil {
		t.Errorf("body is not JSON: %v: %q", err, body)
		return 0
	}
	i := strings.LastIndexByte(b.Load, '-')
	n, err := strconv.ParseUint(b.Load[i+1:], 16, 64)
	if err != nil {
		t.Errorf("body has no request number: %q", b.Load)
	}
	return n
}

func scriptedTarget(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, r.ContentLength)
		if _, err := ioReadFull(r, body); err != nil {
			t.Errorf("cannot read body: %v", err)
			return
		}
		n := seqOf(t, body)
		switch fate(n) {
		case "shed":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":"overloaded"}`)
		case "limited":
			w.WriteHeader(429)
			fmt.Fprint(w, `{"error":"rate_limited"}`)
		case "drop":
			c, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("cannot hijack: %v", err)
				return
			}
			_ = c.Close()
		case "bad":
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"bad_request"}`)
		case "dup":
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"status":"accepted","id":"id-%d","duplicate":true}`, n)
		default:
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"status":"accepted","id":"id-%d"}`, n)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func ioReadFull(r *http.Request, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Body.Read(b[n:])
		n += m
		if err != nil {
			if n == len(b) {
				return n, nil
			}
			return n, err
		}
	}
	return n, nil
}

// Every 201 is counted once and reaches OnAccepted with its id and body (doc.go's
// invariant); 503, 429, other statuses and dropped connections land in exactly one
// counter each, and a dropped connection does not stop the worker (design §8: the
// driver keeps running across server kills).
func TestCountsAreExactAndEveryAckReachesOnAccepted(t *testing.T) {
	srv := scriptedTarget(t)
	const total = 1000
	var mu sync.Mutex
	got := map[string]uint64{}
	rep, err := Run(context.Background(), Options{
		URL:       srv.URL + "/webhooks/sample",
		Workers:   8,
		Requests:  total,
		BodyBytes: 300,
		Headers:   map[string]string{"X-Test": "1"},
		OnAccepted: func(id string, body []byte) {
			if len(body) != 300 {
				t.Errorf("body of %d bytes, want 300", len(body))
			}
			n := seqOf(t, body)
			mu.Lock()
			defer mu.Unlock()
			if _, seen := got[id]; seen {
				t.Errorf("id %s reported twice", id)
			}
			got[id] = n
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Report{StatusCounts: map[int]int64{}}
	for n := uint64(1); n <= total; n++ {
		switch fate(n) {
		case "shed":
			want.Shed++
			want.StatusCounts[503]++
		case "limited":
			want.RateLimited++
			want.StatusCounts[429]++
		case "drop":
			want.Errors++
		case "bad":
			want.Errors++
			want.StatusCounts[400]++
		case "dup":
			want.Duplicates++
			want.Accepted++
			want.StatusCounts[201]++
		default:
			want.Accepted++
			want.StatusCounts[201]++
		}
	}
	if rep.Sent != total || rep.Accepted != want.Accepted || rep.Duplicates != want.Duplicates ||
		rep.Shed != want.Shed || rep.RateLimited != want.RateLimited || rep.Errors != want.Errors {
		t.Fatalf("report %v\nwant sent=%d accepted=%d dup=%d shed=%d rate_limited=%d errors=%d",
			rep, total, want.Accepted, want.Duplicates, want.Shed, want.RateLimited, want.Errors)
	}
	for code, n := range want.StatusCounts {
		if rep.StatusCounts[code] != n {
			t.Errorf("status %d counted %d, want %d", code, rep.StatusCounts[code], n)
		}
	}
	if len(rep.StatusCounts) != len(want.StatusCounts) {
		t.Errorf("status counts %v, want %v", rep.StatusCounts, want.StatusCounts)
	}
	if int64(len(got)) != want.Accepted {
		t.Fatalf("OnAccepted saw %d ids, want %d", len(got), want.Accepted)
	}
	for id, n := range got {
		if id != fmt.Sprintf("id-%d", n) {
			t.Errorf("id %s came with the body of request %d", id, n)
		}
	}
	if rep.P50 <= 0 || rep.P99 < rep.P50 || rep.Max < rep.P99 || rep.AcceptedPerSec <= 0 {
		t.Errorf("latency figures not ordered: %v", rep)
	}
}

// Request bodies are unique per request and per run ("a unique prefix per request"):
// a target that deduplicates on the body must see every request as new.
func TestBodiesAreUniqueAcrossRequestsAndRuns(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		fmt.Fprint(w, `{"status":"accepted","id":"x"}`)
	}))
	defer srv.Close()
	var mu sync.Mutex
	seen := map[string]bool{}
	for range 2 {
		_, err := Run(context.Background(), Options{URL: srv.URL, Workers: 4, Requests: 50, BodyBytes: 10,
			OnAccepted: func(_ string, body []byte) {
				mu.Lock()
				defer mu.Unlock()
				if seen[string(body)] {
					t.Errorf("body sent twice: %s", body)
				}
				seen[string(body)] = true
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 100 {
		t.Fatalf("saw %d distinct bodies, want 100", len(seen))
	}
}

// The open loop sends request i at start + i/Rate, so a run of one second at 200/s
// sends at most 200 requests and, on an idle target, nearly all of them.
func TestOpenLoopHonoursRate(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(201)
		fmt.Fprint(w, `{"status":"accepted","id":"x"}`)
	}))
	defer srv.Close()
	rep, err := Run(context.Background(), Options{URL: srv.URL, Workers: 8, Rate: 200, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent > 200 || rep.Sent < 100 || hits.Load() != rep.Sent {
		t.Fatalf("sent %d (target saw %d) in %v at 200/s for 1s; want 100..200", rep.Sent, hits.Load(), rep.Elapsed)
	}
	if rep.Elapsed < 900*time.Millisecond {
		t.Fatalf("open loop finished in %v, before its duration", rep.Elapsed)
	}
}

// Open-loop latency is measured from the due time, so a target slower than the
// offered rate shows the backlog as latency (coordinated omission): 20 requests due
// 10 ms apart through one worker and a 20 ms target; the last is due at 190 ms but
// cannot finish before 400 ms, so at least ~200 ms of latency must be reported,
// while each request itself takes only 20 ms.
func TestOpenLoopLatencyCountsFromDueTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // the target's service time, not synchronisation
		w.WriteHeader(201)
		fmt.Fprint(w, `{"status":"accepted","id":"x"}`)
	}))
	defer srv.Close()
	rep, err := Run(context.Background(), Options{URL: srv.URL, Workers: 1, Rate: 100, Requests: 20})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Accepted != 20 {
		t.Fatalf("accepted %d, want 20", rep.Accepted)
	}
	if rep.Max < 150*time.Millisecond {
		t.Fatalf("max latency %v: the backlog behind a slow target was not counted", rep.Max)
	}
	// The one worker was busy when most requests fell due: the sends left late, and the report says by how much
	// (the last was due at 190 ms and left after 19 answers of at least 20 ms each); a send is never later than
	// its ack.
	if rep.LateP99 < 150*time.Millisecond || rep.LateP99 > rep.P99 {
		t.Fatalf("late p99 %v with ack p99 %v: the generator's own lag was not reported", rep.LateP99, rep.P99)
	}
}

// Cancelling the context stops the run early and still returns what was seen.
func TestCancelStopsEarlyAndReturnsTheReport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		fmt.Fprint(w, `{"status":"accepted","id":"x"}`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var acked atomic.Int64
	var rep Report
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rep, err = Run(ctx, Options{URL: srv.URL, Workers: 4, Duration: time.Hour,
			OnAccepted: func(string, []byte) { acked.Add(1) }})
	}()
	poll.True(t, 10*time.Second, "100 hooks acked", func() bool { return acked.Load() >= 100 })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Accepted != acked.Load() || rep.Accepted < 100 || rep.Sent != rep.Accepted {
		t.Fatalf("report %v, OnAccepted saw %d", rep, acked.Load())
	}
}

// A target that dies and comes back on the same port: the driver counts the
// failures as errors, reconnects, and goes on (the kill -9 tests keep one driver
// running across restarts).
func TestDriverSurvivesTargetRestart(t *testing.T) {
	handler := func(tag string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"status":"accepted","id":"%s"}`, tag)
		})
	}
	first := httptest.NewServer(handler("first"))
	addr := first.Listener.Addr().String()
	var fromFirst, fromSecond atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rep Report
	done := make(chan struct{})
	go func() {
		defer close(done)
		rep, _ = Run(ctx, Options{URL: "http://" + addr + "/webhooks/x", Workers: 4, Duration: time.Minute,
			OnAccepted: func(id string, _ []byte) {
				if id == "first" {
					fromFirst.Add(1)
				} else {
					fromSecond.Add(1)
				}
			}})
	}()
	poll.True(t, 10*time.Second, "50 acks from the first target", func() bool { return fromFirst.Load() >= 50 })
	first.CloseClientConnections()
	first.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		cancel()
		<-done
		t.Skipf("port %s taken before the restart: %v", addr, err)
	}
	second := httptest.NewUnstartedServer(handler("second"))
	second.Listener = ln
	second.Start()
	defer second.Close()
	poll.True(t, 20*time.Second, "50 acks from the restarted target", func() bool { return fromSecond.Load() >= 50 })
	cancel()
	<-done
	if rep.Errors == 0 {
		t.Fatalf("no errors counted across a restart: %v", rep)
	}
	if rep.Sent != rep.Accepted+rep.Errors {
		t.Fatalf("sent %d != accepted %d + errors %d", rep.Sent, rep.Accepted, rep.Errors)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	f := func(o Options, want error) {
		t.Helper()
		if _, err := Run(context.Background(), o); !errors.Is(err, want) {
			t.Errorf("Run(%+v) = %v, want %v", o, err, want)
		}
	}
	f(Options{Requests: 1}, ErrNoURL)
	f(Options{URL: "http://127.0.0.1:1/"}, ErrUnbounded)
	f(Options{URL: "ftp://127.0.0.1:1/", Requests: 1}, ErrBadURL)
	f(Options{URL: "/webhooks/x", Requests: 1}, ErrBadURL)
	f(Options{URL: "http://127.0.0.1:1/", Requests: 1, Workers: -1}, ErrBadOptions)
}

// The driver's own cost per request stays near zero allocations, so on a two-core
// machine it measures the target rather than itself. The in-process fasthttp target
// answers from preallocated buffers; both sides are counted.
func TestRequestPathDoesNotAllocate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ack := []byte(`{"status":"accepted","id":"0190a6c4-7d2e-7b3c-9f00-0123456789ab"}`)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(201)
		ctx.SetBody(ack)
	}, MaxIdleWorkerDuration: 50 * time.Millisecond} // its idle-worker cleaner wakes this often, and so exits soon after Shutdown
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()

	o, tg, err := Options{URL: "http://" + ln.Addr().String() + "/webhooks/x", Requests: 1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := &run{o: o, t: tg, done: make(chan struct{}), start: time.Now()}
	var nonce [8]byte
	w := newWorker(r, nonce[:])
	defer w.release()
	n := int64(0)
	allocs := testing.AllocsPerRun(2000, func() {
		n++
		w.do(n, time.Now())
	})
	if w.accepted != 2001 {
		t.Fatalf("accepted %d of 2001: %v", w.accepted, w.status[:300])
	}
	t.Logf("%.3f allocations per request (driver and target)", allocs)
	if allocs > 1 {
		t.Fatalf("%.2f allocations per request, want at most 1", allocs)
	}
}
