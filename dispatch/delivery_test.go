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
	"github.com/ankusa-go/ankusa/test/poll"
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
	mu   sync.Mutex
	got  []received
	hits map[string]int
	// cancelled counts requests whose client hung up while the server delayed its answer.
	cancelled atomic.Int64
	respond   func(r received, hit int) (status int, header http.Header, delay time.Duration)
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
				s.cancelled.Add(1)
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
	id, err := tryIngest(inst, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// tryIngest is ingest for a goroutine a test started: it returns its error instead of failing the test.
func tryIngest(inst *instance.Instance, path string, body []byte) (string, error) {
	resp, err := client.Post("http://"+inst.IngestAddr()+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var a struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&a)
	if resp.StatusCode != 201 || a.ID == "" {
		return "", fmt.Errorf("ingest %s: %d", path, resp.StatusCode)
	}
	return a.ID, nil
}

func counts(inst *instance.Instance) store.Counts { return inst.Store().Counts() }

// Design: "At-least-once to every sink"; inventory D.3: raw body verbatim with the
// x-ankusa-* headers; E.3: "a hook is deleted once its last obligation clears (every delivery row,
// + archive obligation if present)": the storage role runs, so the compactor's clearing is the other half.
func TestEveryHookDeliveredToEverySink(t *testing.T) {
	a := newSinkServer(t, nil)
	b := newSinkServer(t, nil)
	inst := start(t, map[string]config.Source{
		"two": {Tenant: "acme", Sinks: []config.SinkSpec{
			{Type: "http", Options: map[string]any{"url": a.URL}}, {Type: "http", Options: map[string]any{"url": b.URL}}}},
	}, func(cfg *config.Config) { cfg.Storage.RollMS, cfg.Storage.IntervalMS = 1, 20 })
	const n = 50
	sent := map[string][]byte{}
	for i := range n {
		body := fmt.Appendf(nil, "{\"n\":%d,\"raw\":\"\\u0000\"}\n", i)
		sent[ingest(t, inst, "/webhooks/two", body)] = body
	}
	for _, srv := range []*sinkServer{a, b} {
		poll.True(t, 10*time.Second, "every hook at the sink", func() bool { return len(srv.delivered()) >= n })
		for _, r := range srv.delivered() {
			if !bytes.Equal(sent[r.id], r.body) || r.tenant != "acme" || r.source != "two" {
				t.Fatalf("delivery %+v does not match what was ingested", r)
			}
		}
	}
	poll.True(t, 5*time.Second, "hooks reclaimed", func() bool {
		ids, _ := inst.Store().HookIDs()
		return len(ids) == 0
	})
	if c := counts(inst); c.Pending+c.Scheduled+c.Inflight+c.Dead+c.ArchivePending != 0 {
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
	poll.True(t, 10*time.Second, "delivery after two failures", func() bool { return len(srv.delivered()) == 1 })
	if h := srv.hitsOf(id); h != 3 {
		t.Fatalf("%d attempts, want 3", h)
	}
}

// Inventory D.2: 400/401/403/404/410/413/422 are permanent: dead-lettered at once, hook kept.
func TestPermanentFailureDeadLetters(t *testing.T) {
	srv := newSinkServer(t, func(received, int) (int, http.Header, time.Duration) { return 422, nil, 0 })
	inst := start(t, map[string]config.Source{"s": httpSource("default", srv.URL, false)}, nil)
	id := ingest(t, inst, "/webhooks/s", []byte(`{"x":1}`))
	poll.True(t, 10*time.Second, "the row to be dead", func() bool { return counts(inst).Dead == 1 })
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
	poll.True(t, 10*time.Second, "the retry", func() bool { return len(srv.delivered()) == 1 })
	if gap := srv.delivered()[0].at.Sub(time.Unix(0, first.Load())); gap < 950*time.Millisecond {
		t.Fatalf("retried %v after a Retry-After of 1 s", gap)
	}
}

// Inventory B.3: dispatch.attempt_timeout_ms kills a hung attempt, which is retried. The
// first attempt never answers on its own, so a delivery proves it was abandoned; the sink
// seeing its request cancelled proves it was killed, not left hanging. Only lower bounds
// on time are asserted: scheduling delay on a busy machine can only make the gap longer.
func TestAttemptTimeoutIsRetried(t *testing.T) {
	const timeout = time.Second
	var first atomic.Int64
	srv := newSinkServer(t, func(r received, hit int) (int, http.Header, time.Duration) {
		if hit == 1 {
			first.Store(r.at.UnixNano())
			return 200, nil, time.Hour // until the attempt gives up
		}
		return 200, nil, 0
	})
	// The sink's own timeout is the longest it takes, so that only the attempt timeout can end the hang.
	src := httpSource("default", srv.URL, false)
	src.Sinks[0].Options["timeout_ms"] = 3_600_000
	inst := start(t, map[string]config.Source{"s": src}, func(c *config.Config) {
		c.Dispatch.AttemptTimeoutMS = int(timeout / time.Millisecond)
	})
	id := ingest(t, inst, "/webhooks/s", []byte(`{}`))
	poll.True(t, 20*time.Second, "delivery after a timed-out attempt", func() bool { return len(srv.delivered()) == 1 })
	poll.True(t, 5*time.Second, "the hung attempt's request to be cancelled", func() bool { return srv.cancelled.Load() >= 1 })
	if h := srv.hitsOf(id); h < 2 {
		t.Fatalf("%d attempts, want the hung one and a retry", h)
	}
	// The attempt's clock starts before its request reaches the sink: allow that much early.
	if gap := srv.delivered()[0].at.Sub(time.Unix(0, first.Load())); gap < timeout*3/4 {
		t.Fatalf("retried %v after the hung attempt started, before its %v timeout", gap, timeout)
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
	poll.True(t, 10*time.Second, "the row to be dead", func() bool { return counts(inst).Dead == 1 })
	if h := srv.hitsOf(id); h != 3 {
		t.Fatalf("%d attempts, want 3", h)
	}
	dead, _ := inst.Store().ListDead("", 10)
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "gave up after 3 attempts") {
		t.Fatalf("dead %+v", dead)
	}
}

// Inventory F.3: after breaker_failures consecutive failures the key's rows are parked
// without spending attempts; one probe after each open period; a probe that succeeds
// closes it. The sink is counted over a window of measured length rather than required
// to see nothing in a fixed one: whatever the scheduling delay, an open breaker lets
// through at most the attempts already in flight when it opened (one per row) and one
// probe per open period, where a missing breaker retries every row every 10 ms.
func TestBreakerParksWithoutSpendingAttempts(t *testing.T) {
	const rows, failures, open = 5, 3, 500 * time.Millisecond
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
		c.Dispatch.BreakerFailures = failures
		c.Dispatch.BreakerOpenMS = int(open / time.Millisecond)
		c.Dispatch.BreakerMaxOpenMS = int(open / time.Millisecond)
		c.Dispatch.Retry = config.Retry{BaseMS: 10, MaxMS: 10, MaxAttempts: 1000}
	})
	begin := time.Now()
	for i := range rows {
		ingest(t, inst, "/webhooks/s", fmt.Appendf(nil, `{"n":%d}`, i))
	}
	poll.True(t, 10*time.Second, "the breaker to open", func() bool { return hits.Load() >= failures })
	// A measuring window, not a wait for a condition: the sink keeps failing through it.
	time.Sleep(3 * open)
	h := hits.Load()
	elapsed := time.Since(begin) // read after the count, so the bound can only be generous
	if bound := int64(failures + rows + int(elapsed/open) + 1); h > bound {
		t.Fatalf("%d attempts reached a failing sink in %v; an open breaker lets through at most %d", h, elapsed, bound)
	}
	healthy.Store(true)
	poll.True(t, 20*time.Second, "the probe to close the breaker and deliver all", func() bool { return len(srv.delivered()) == rows })
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
	poll.True(t, 10*time.Second, "ten dead rows", func() bool { return counts(inst).Dead == 10 })
	healthy.Store(true)
	job, err := inst.Dispatcher().CreateReplay(dispatchReplay())
	if err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "replayed deliveries", func() bool { return len(srv.delivered()) == 10 })
	for _, r := range srv.delivered() {
		if r.replayID == "" {
			t.Fatalf("replayed delivery without x-ankusa-replay-id")
		}
	}
	poll.True(t, 5*time.Second, "the DLQ to be empty", func() bool { return counts(inst).Dead == 0 })
	poll.True(t, 5*time.Second, "the job to be done", func() bool {
		jobs, _ := inst.Dispatcher().Replays()
		return len(jobs) == 1 && jobs[0].ID == job.ID && jobs[0].State == "done" && jobs[0].Moved == 10
	})
}
