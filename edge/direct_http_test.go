package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// destination is an HTTP sink's endpoint: it records every delivery it is sent and
// answers status (200 when 0), after hold is closed when hold is set. A held delivery
// also ends when the sink gives up on it.
type destination struct {
	srv      *httptest.Server
	status   atomic.Int32
	hold     chan struct{}
	released sync.Once
	calls    atomic.Int64
	mu       sync.Mutex
	ids      []string
	bodies   []string
	events   []string // X-Github-Event, a forwarded provider header
	auths    []string // Authorization, a credential that must not be forwarded
	// answered is when it last answered a delivery 2xx (unix ns).
	answered atomic.Int64
}

func newDestination(t *testing.T, held bool) *destination {
	d := &destination{}
	if held {
		d.hold = make(chan struct{})
	}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.ids = append(d.ids, r.Header.Get("X-Ankusa-Id"))
		d.bodies = append(d.bodies, string(body))
		d.events = append(d.events, r.Header.Get("X-Github-Event"))
		d.auths = append(d.auths, r.Header.Get("Authorization"))
		d.mu.Unlock()
		d.calls.Add(1)
		if d.hold != nil {
			select {
			case <-d.hold:
			case <-r.Context().Done():
				return
			}
		}
		status := int(d.status.Load())
		if status == 0 {
			status = 200
			d.answered.Store(time.Now().UnixNano())
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(d.srv.Close)
	t.Cleanup(d.release) // runs first: a held handler returns before Close waits for it
	return d
}

func (d *destination) release() {
	if d.hold != nil {
		d.released.Do(func() { close(d.hold) })
	}
}

func (d *destination) received() (ids, bodies []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.ids...), append([]string(nil), d.bodies...)
}

func (d *destination) sink() config.SinkSpec {
	return config.SinkSpec{Type: "http", Options: map[string]any{"url": d.srv.URL + "/hook"}}
}

// startDirect starts an instance under wal.type none whose source "gh" publishes to
// sinks; wrap (may be nil) wraps the built sinks.
func startDirect(t *testing.T, timeoutMS int, wrap func(string, int, sinks.Sink) sinks.Sink, sinks ...config.SinkSpec) *instance.Instance {
	t.Helper()
	return fixture.InstanceWith(t, "direct", func(c *config.Config) {
		c.WAL.Type = config.WALNone
		c.WAL.PublishTimeoutMS = timeoutMS
		c.Node.Roles = []string{"edge"}
		c.Sources = map[string]config.Source{"gh": {Tenant: "default", Sinks: sinks}}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel), WrapSink: wrap})
}

// Design: "Ingest publishes to every sink concurrently in the request … and answers
// 201 only after each confirmed"; "No queue, no batcher". Two HTTP sinks, one held
// until both have the hook: the 201 comes only after the held one answered, both got
// the 201's id, and the node's store holds no hook.
func TestDirectAckWaitsForEverySink(t *testing.T) {
	fast, slow := newDestination(t, false), newDestination(t, true)
	inst := startDirect(t, 8000, nil, fast.sink(), slow.sink())

	answer := make(chan reply, 1)
	go func() {
		answer <- send(inst, "/webhooks/gh", []byte(`{"n":1}`), "X-Github-Event", "push", "Authorization", "Bearer provider-token")
	}()
	poll.True(t, 10*time.Second, "both sinks received the hook", func() bool { return fast.calls.Load() == 1 && slow.calls.Load() == 1 })
	select {
	case r := <-answer:
		t.Fatalf("answered %d (%s) while a sink had not confirmed", r.status, r.raw)
	default:
	}
	slow.release()
	r := <-answer
	acked := time.Now().UnixNano()
	r.expect(t, 201, "")
	if at := slow.answered.Load(); at == 0 || at > acked {
		t.Fatalf("201 before the held sink answered (answered at %d, ack seen at %d)", at, acked)
	}
	for name, d := range map[string]*destination{"fast": fast, "slow": slow} {
		ids, bodies := d.received()
		if len(ids) != 1 || ids[0] != r.body["id"] || bodies[0] != `{"n":1}` {
			t.Fatalf("%s sink got ids %v bodies %q, want the 201's id %v and the body", name, ids, bodies, r.body["id"])
		}
		d.mu.Lock()
		event, auth := d.events[0], d.auths[0]
		d.mu.Unlock()
		if event != "push" || auth != "" {
			t.Fatalf("%s sink got X-Github-Event %q Authorization %q, want the provider header forwarded and the credential not", name, event, auth)
		}
	}
	n := 0
	if err := inst.Store().ForEachHook(func(uint64, *store.Hook) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the store holds %d hooks under wal.type none, want none", n)
	}
}

// Design: "any sink failure … is a 503 with Retry-After, with no internal retry, and
// sinks that confirmed keep their copy". One sink refuses: the answer is 503 with
// Retry-After, the refusing sink was asked exactly once, the other one kept the hook.
func TestDirectRefusingSinkIs503WithoutRetry(t *testing.T) {
	good, bad := newDestination(t, false), newDestination(t, false)
	bad.status.Store(503)
	inst := startDirect(t, 8000, nil, good.sink(), bad.sink())

	r := postBody(t, inst, "/webhooks/gh", []byte(`{"n":2}`))
	r.expect(t, 503, "store_unavailable")
	if r.retryAfter != "1" || r.body["reason"] != "sink_refused" {
		t.Fatalf("Retry-After %q reason %v, want 1 and sink_refused (%s)", r.retryAfter, r.body["reason"], r.raw)
	}
	if n := bad.calls.Load(); n != 1 {
		t.Fatalf("the refusing sink was asked %d times, want once (no internal retry)", n)
	}
	if _, bodies := good.received(); len(bodies) != 1 || bodies[0] != `{"n":2}` {
		t.Fatalf("the confirming sink got %q, want its copy of the hook", bodies)
	}
	metrics := scrape(t, inst)
	for _, series := range []string{
		`ankusa_dispatch_deliveries_total{instance="direct",result="error",sink="http"} 1`,
		`ankusa_dispatch_deliveries_total{instance="direct",result="ok",sink="http"} 1`,
		`ankusa_ingest_requests_total{instance="direct",outcome="store_unavailable",source_id="gh"} 1`,
	} {
		if !strings.Contains(metrics, "\n"+series+"\n") {
			t.Fatalf("/metrics lacks %s", series)
		}
	}
}

// scrape reads the admin listener's /metrics.
func scrape(t *testing.T, inst *instance.Instance) string {
	t.Helper()
	resp, err := testClient.Get("http://" + inst.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// panicking is a sink whose Deliver panics.
type panicking struct{ sinks.Sink }

func (panicking) Deliver(context.Context, *sinks.Envelope) error { panic("sink exploded") }

// Design: "A sink refusing, raising, throwing, exiting or missing the deadline is the
// 503". A panicking sink is a 503 sink_panicked and the node goes on serving; a sink
// slower than wal.publish_timeout_ms is a 503 publish_timeout at the deadline (the held
// destination is released only after the answer).
func TestDirectPanicAndTimeoutAre503(t *testing.T) {
	t.Run("panic", func(t *testing.T) {
		good := newDestination(t, false)
		inst := startDirect(t, 8000, func(_ string, i int, s sinks.Sink) sinks.Sink {
			if i == 1 {
				return panicking{s}
			}
			return s
		}, good.sink(), good.sink())
		for range 2 {
			r := postBody(t, inst, "/webhooks/gh", []byte(`{}`))
			r.expect(t, 503, "store_unavailable")
			if r.retryAfter != "1" || r.body["reason"] != "sink_panicked" {
				t.Fatalf("Retry-After %q reason %v, want 1 and sink_panicked", r.retryAfter, r.body["reason"])
			}
		}
		if n := good.calls.Load(); n != 2 {
			t.Fatalf("the sound sink got %d hooks, want 2", n)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		good, slow := newDestination(t, false), newDestination(t, true)
		inst := startDirect(t, 300, nil, good.sink(), slow.sink())
		r := postBody(t, inst, "/webhooks/gh", []byte(`{}`))
		r.expect(t, 503, "store_unavailable")
		if r.retryAfter != "1" || r.body["reason"] != "publish_timeout" {
			t.Fatalf("Retry-After %q reason %v, want 1 and publish_timeout", r.retryAfter, r.body["reason"])
		}
		if n := slow.calls.Load(); n != 1 {
			t.Fatalf("the slow sink was asked %d times, want once", n)
		}
	})
}

// readyBody is a /ready answer.
type readyBody struct {
	Status  string `json:"status"`
	Sinks   string `json:"sinks"`
	Reasons struct {
		Sinks []struct {
			Source string `json:"source_id"`
			Index  int    `json:"sink"`
			Type   string `json:"type"`
		} `json:"sinks"`
	} `json:"reasons"`
}

func getReady(t *testing.T, addr string) (int, readyBody, string) {
	t.Helper()
	resp, err := testClient.Get("http://" + addr + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var b readyBody
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("/ready answered %q: %v", raw, err)
	}
	return resp.StatusCode, b, string(raw)
}

// Inventory A.4: /ready reports "sinks (wal none; failure within
// health.sink_error_window_ms)". A sink whose publish just failed makes /ready 503 on the
// ingest and admin ports, naming the source, the sink's index and type and never its
// URL; once it confirms again /ready is 200 with sinks ok.
func TestDirectReadyNamesFailingSink(t *testing.T) {
	good, bad := newDestination(t, false), newDestination(t, false)
	inst := startDirect(t, 8000, nil, good.sink(), bad.sink())
	for _, addr := range []string{inst.IngestAddr(), inst.AdminAddr()} {
		if code, b, raw := getReady(t, addr); code != 200 || b.Sinks != "ok" {
			t.Fatalf("/ready on %s before any failure: %d %s, want 200 with sinks ok", addr, code, raw)
		}
	}
	bad.status.Store(500)
	postBody(t, inst, "/webhooks/gh", []byte(`{}`)).expect(t, 503, "store_unavailable")
	for _, addr := range []string{inst.IngestAddr(), inst.AdminAddr()} {
		code, b, raw := getReady(t, addr)
		if code != 503 || b.Sinks != "failing" || len(b.Reasons.Sinks) != 1 {
			t.Fatalf("/ready on %s after a failed publish: %d %s, want 503 naming one failing sink", addr, code, raw)
		}
		if f := b.Reasons.Sinks[0]; f.Source != "gh" || f.Index != 1 || f.Type != "http" {
			t.Fatalf("/ready names %+v, want source gh sink 1 http", f)
		}
		if strings.Contains(raw, "127.0.0.1") {
			t.Fatalf("/ready shows a sink's URL: %s", raw)
		}
	}
	bad.status.Store(0)
	postBody(t, inst, "/webhooks/gh", []byte(`{}`)).expect(t, 201, "")
	if code, b, raw := getReady(t, inst.IngestAddr()); code != 200 || b.Sinks != "ok" {
		t.Fatalf("/ready after the sink confirmed again: %d %s, want 200", code, raw)
	}
}

// Design: the local state of wal: :none "is the quarantine pen", and a quarantine
// release "commits the ones that pass with their original id". Under none a release
// publishes each hook that now verifies to the source's sinks with its original id and
// removes it from the pen only once they confirmed; a forged hook stays held.
func TestDirectQuarantineReleasePublishes(t *testing.T) {
	dest := newDestination(t, false)
	dir := t.TempDir()
	startPen := func(secrets ...string) *instance.Instance {
		return fixture.InstanceWith(t, "direct", func(c *config.Config) {
			c.Node.DataDir = dir
			c.WAL.Type = config.WALNone
			c.Node.Roles = []string{"edge"}
			src := penSource(secrets...)
			src.Sinks = []config.SinkSpec{dest.sink()}
			c.Sources = map[string]config.Source{"pen": src}
		}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})
	}
	body := []byte(`{"event":"rotated"}`)
	inst := startPen("old-secret")
	postBody(t, inst, "/webhooks/pen", body, "X-Hub-Signature-256", sign("new-secret", body)).expect(t, 202, "")
	postBody(t, inst, "/webhooks/pen", []byte(`{"forged":1}`), "X-Hub-Signature-256", forgedSig).expect(t, 202, "")
	held, err := inst.Store().ListQuarantine("", 10)
	if err != nil || len(held) != 2 || dest.calls.Load() != 0 {
		t.Fatalf("held %v %v, sink called %d times; want 2 held and nothing published", held, err, dest.calls.Load())
	}
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}

	inst = startPen("new-secret", "old-secret")
	dest.status.Store(503)
	rep, err := inst.Edge().ReleaseQuarantine("pen", 100)
	if err != nil || rep.Released != 0 || rep.Held != 2 {
		t.Fatalf("release while the sink refuses: %+v %v; want both still held", rep, err)
	}
	dest.status.Store(0)
	rep, err = inst.Edge().ReleaseQuarantine("pen", 100)
	if err != nil || rep.Released != 1 || rep.Held != 1 {
		t.Fatalf("release: %+v %v; want 1 released, 1 held", rep, err)
	}
	ids, bodies := dest.received()
	last := len(ids) - 1
	if bodies[last] != string(body) || !slices.ContainsFunc(held, func(s store.QuarantineSummary) bool { id, ok := edge.ParseID(ids[last]); return ok && s.ID == id }) {
		t.Fatalf("sink got %q with id %s, want the rotated hook with its original id", bodies[last], ids[last])
	}
	if _, n := inst.Store().QuarantineStats(); n != 1 {
		t.Fatalf("pen holds %d; the published hook must leave it and the forged one stay", n)
	}
}
