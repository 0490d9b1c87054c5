package dispatch_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/fixture"
)

// received is one request the sink server got.
type received struct {
	id, replayID, tenant, source string
	body                         []byte
	at                           time.Time
}

// sinkServer is a real HTTP destination whose answers a test scripts.
type sinkServer struct {
	*httptest.Server
	mu      sync.Mutex
	got     []received
	hits    map[string]int
	respond func(r received, hit int) (status int, header http.Header, delay time.Duration)
}

func newSinkServer(t testing.TB, respond func(r received, hit int) (int, http.Header, time.Duration)) *sinkServer {
	s := &sinkServer{hits: map[string]int{}, respond: respond}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r := received{id: req.Header.Get("x-ankusa-id"), replayID: req.Header.Get("x-ankusa-replay-id"),
			tenant: req.Header.Get("x-ankusa-tenant"), source: req.Header.Get("x-ankusa-source"), body: body, at: time.Now()}
		s.mu.Lock()
		s.hits[r.id]++
		hit := s.hits[r.id]
		s.mu.Unlock()
		status, h, delay := 200, http.Header(nil), time.Duration(0)
		if s.respond != nil {
			status, h, delay = s.respond(r, hit)
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-req.Context().Done():
				return
			}
		}
		if status/100 == 2 {
			s.mu.Lock()
			s.got = append(s.got, r)
			s.mu.Unlock()
		}
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sinkServer) delivered() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

func (s *sinkServer) hitsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[id]
}

// start runs an instance whose sources deliver to the given sinks, with short retries.
func start(t testing.TB, sources map[string]config.Source, mutate func(*config.Config)) *instance.Instance {
	t.Helper()
	return fixture.Instance(t, "disp", func(cfg *config.Config) {
		cfg.Admin.Enabled = false
		cfg.Dispatch.Retry = config.Retry{BaseMS: 20, MaxMS: 200, MaxAttempts: 10, Jitter: false}
		cfg.Dispatch.AttemptTimeoutMS = 2000
		cfg.Sources = sources
		if mutate != nil {
			mutate(cfg)
		}
	}, nil)
}

func httpSource(tenant, url string, ordered bool) config.Source {
	return config.Source{Tenant: tenant, Sinks: []config.SinkSpec{{Type: "http", Ordered: ordered, Options: map[string]any{"url": url}}}}
}

// ingest posts one hook and returns its id.
func ingest(t testing.TB, inst *instance.Instance, path string, body []byte) string {
	t.Helper()
	resp, err := http.Post("http://"+inst.IngestAddr()+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&a)
	if resp.StatusCode != 201 || a.ID == "" {
		t.Fatalf("ingest %s: %d", path, resp.StatusCode)
	}
	return a.ID
}

func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func counts(inst *instance.Instance) store.Counts { return inst.Store().Counts() }

// Design: "At-least-once to every sink"; inventory D.3: raw body verbatim with the
// x-ankusa-* headers; E.3: "a hook is deleted once its last obligation clears".
func TestEveryHookDeliveredToEverySink(t *testing.T) {
	a := newSinkServer(t, nil)
	b := newSinkServer(t, nil)
	inst := start(t, map[string]config.Source{
		"two": {Tenant: "acme", Sinks: []config.SinkSpec{
			{Type: "http", Options: map[string]any{"url": a.URL}}, {Type: "http", Options: map[string]any{"url": b.URL}}}},
	}, nil)
	const n = 50
	sent := map[string][]byte{}
	for i := range n {
		body := fmt.Appendf(nil, "{\"n\":%d,\"raw\":\"\\u0000\"}\n", i)
		sent[ingest(t, inst, "/webhooks/two", body)] = body
	}
	for _, srv := range []*sinkServer{a, b} {
		eventually(t, 10*time.Second, "every hook at the sink", func() bool { return len(srv.delivered()) >= n })
		for _, r := range srv.delivered() {
			if !bytes.Equal(sent[r.id], r.body) || r.tenant != "acme" || r.source != "two" {
				t.Fatalf("delivery %+v does not match what was ingested", r)
			}
		}
	}
	eventually(t, 5*time.Second, "hooks reclaimed", func() bool {
		ids, _ := inst.Store().HookIDs()
		return len(ids) == 0
	})
	if c := counts(inst); c.Pending+c.Scheduled+c.Inflight+c.Dead != 0 {
		t.Fatalf("rows left after delivery: %+v", c)
	}
}

// Inventory F.2/D.2: 5xx is retried with back-off until the sink confirms.
func TestTransientFailureIsRetried(t *testing.T) {
	srv := newSinkServer(t, func(_ received, hit int) (int, http.Header, time.Duration) {
		if hit < 3 {
			return 500, nil, 0
		}
		return 200, nil, 0
	})
	inst := start(t, map[string]config.Source{"s": httpSource("default", srv.URL, false)}, nil)
	id := ingest(t, inst, "/webhooks/s", []byte(`{}`))
	eventually(t, 10*time.Second, "delivery after two failures", func() bool { return len(srv.delivered()) == 1 })
	if h := srv.hitsOf(id); h != 3 {
		t.Fatalf("%d attempts, want 3", h)
	}
}

// Inventory D.2: 400/401/403/404/410/413/422 are permanent: dead-lettered at once, hook kept.
func TestPermanentFailureDeadLetters(t *testing.T) {
	srv := newSinkServer(t, func(received, int) (int, http.Header, time.Duration) { return 422, nil, 0 })
	inst := start(t, map[string]config.Source{"s": httpSource("default", srv.URL, false)}, nil)
	id := ingest(t, inst, "/webhooks/s", []byte(`{"x":1}`))
	eventually(t, 10*time.Second, "the row to be dead", func() bool { return counts(inst).Dead == 1 })
	time.Sleep(100 * time.Millisecond)
	if h := srv.hitsOf(id); h != 1 {
		t.Fatalf("a permanent failure was attempted %d times", h)
	}
	dead, err := inst.Store().ListDead("", 10)
	if err != nil || len(dead) != 1 || !strings.Contains(dead[0].Reason, "422") {
		t.Fatalf("dead entries %+v %v", dead, err)
	}
	if ids, _ := inst.Store().HookIDs(); len(ids) != 1 {
		t.Fatal("a dead row must keep its hook")
	}
}

// Inventory D.1: "{:retry_after, ms, term} → next attempt ≥ ms".
func TestRetryAfterIsHonoured(t *testing.T) {
	var first atomic.Int64
	srv := newSinkServer(t, func(r received, hit int) (int, http.Header, time.Duration) {
		if hit == 1 {
			first.Store(r.at.UnixNano())
			return 503, http.Header{"Retry-After": {"1"}}, 0
		}
		return 200, nil, 0
	})
	inst := start(t, map[string]config.Source{"s": httpSource("default", srv.URL, false)}, nil)
	ingest(t, inst, "/webhooks/s", []byte(`{}`))
	eventually(t, 10*time.Second, "the retry", func() bool { return len(srv.delivered()) == 1 })
	if gap := srv.delivered()[0].at.Sub(time.Unix(0, first.Load())); gap < 950*time.Millisecond {
		t.Fatalf("retried %v after a Retry-After of 1 s", gap)
	}
}

// Inventory B.3: dispatch.attempt_timeout_ms kills a hung attempt, which is retried.
func TestAttemptTimeoutIsRetried(t *testing.T) {
	srv := newSinkServer(t, func(_ received, hit int) (int, http.Header, time.Duration) {
		if hit == 1 {
			return 200, nil, 5 * time.Second
		}
		return 200, nil, 0
	})
	inst := start(t, map[string]config.Source{"s": httpSource("default", srv.URL, false)}, func(c *config.Config) {
		c.Dispatch.AttemptTimeoutMS = 200
	})
	id := ingest(t, inst, "/webhooks/s", []byte(`{}`))
	eventually(t, 10*time.Second, "delivery after a timed-out attempt", func() bool { return len(srv.delivered()) == 1 })
	if h := srv.hitsOf(id); h != 2 {
		t.Fatalf("%d attempts, want 2", h)
	}
}

// Inventory F.2: give up after max_attempts; the reason says so.
func TestGiveUpAfterMaxAttempts(t *testing.T) {
	srv := newSinkServer(t, func(received, int) (int, http.Header, time.Duration) { return 500, nil, 0 })
	inst := start(t, map[string]config.Source{"s": httpSource("default", srv.URL, false)}, func(c *config.Config) {
		c.Dispatch.Retry.MaxAttempts = 3
		c.Dispatch.BreakerFailures = 0
	})
	id := ingest(t, inst, "/webhooks/s", []byte(`{}`))
	eventually(t, 10*time.Second, "the row to be dead", func() bool { return counts(inst).Dead == 1 })
	if h := srv.hitsOf(id); h != 3 {
		t.Fatalf("%d attempts, want 3", h)
	}
	dead, _ := inst.Store().ListDead("", 10)
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "gave up after 3 attempts") {
		t.Fatalf("dead %+v", dead)
	}
}

// Inventory F.3: after breaker_failures consecutive failures the key's rows are parked
// without spending attempts; one probe after the open period closes it.
func TestBreakerParksWithoutSpendingAttempts(t *testing.T) {
	var healthy atomic.Bool
	var hits atomic.Int64
	srv := newSinkServer(t, func(received, int) (int, http.Header, time.Duration) {
		hits.Add(1)
		if healthy.Load() {
			return 200, nil, 0
		}
		return 500, nil, 0
	})
	inst := start(t, map[string]config.Source{"s": httpSource("default", srv.URL, false)}, func(c *config.Config) {
		c.Dispatch.BreakerFailures = 3
		c.Dispatch.BreakerOpenMS = 700
		c.Dispatch.BreakerMaxOpenMS = 700
		c.Dispatch.Retry = config.Retry{BaseMS: 10, MaxMS: 10, MaxAttempts: 1000}
	})
	for i := range 5 {
		ingest(t, inst, "/webhooks/s", fmt.Appendf(nil, `{"n":%d}`, i))
	}
	eventually(t, 5*time.Second, "the breaker to open", func() bool { return hits.Load() >= 3 })
	time.Sleep(50 * time.Millisecond)
	opened := hits.Load()
	time.Sleep(400 * time.Millisecond) // inside the 700 ms open period
	if h := hits.Load(); h != opened {
		t.Fatalf("%d attempts reached the sink while its breaker was open", h-opened)
	}
	healthy.Store(true)
	eventually(t, 10*time.Second, "the probe to close the breaker and deliver all", func() bool { return len(srv.delivered()) == 5 })
}

// Design: "DLQ entries are dead delivery rows; a replay moves them back to pending, so a
// replayed hook leaves the DLQ"; inventory F.5: only rows dead at job creation move,
// replayed deliveries carry the replay id.
func TestDLQReplay(t *testing.T) {
	var healthy atomic.Bool
	srv := newSinkServer(t, func(received, int) (int, http.Header, time.Duration) {
		if healthy.Load() {
			return 200, nil, 0
		}
		return 410, nil, 0
	})
	inst := start(t, map[string]config.Source{"s": httpSource("default", srv.URL, false)}, nil)
	for i := range 10 {
		ingest(t, inst, "/webhooks/s", fmt.Appendf(nil, `{"n":%d}`, i))
	}
	eventually(t, 10*time.Second, "ten dead rows", func() bool { return counts(inst).Dead == 10 })
	healthy.Store(true)
	job, err := inst.Dispatcher().CreateReplay(dispatchReplay())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "replayed deliveries", func() bool { return len(srv.delivered()) == 10 })
	for _, r := range srv.delivered() {
		if r.replayID == "" {
			t.Fatalf("replayed delivery without x-ankusa-replay-id")
		}
	}
	eventually(t, 5*time.Second, "the DLQ to be empty", func() bool { return counts(inst).Dead == 0 })
	eventually(t, 5*time.Second, "the job to be done", func() bool {
		jobs, _ := inst.Dispatcher().Replays()
		return len(jobs) == 1 && jobs[0].ID == job.ID && jobs[0].State == "done" && jobs[0].Moved == 10
	})
}
