package edge_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// start runs one ingest-only instance with the sources the tests use.
func start(t testing.TB, mutate func(*config.Config), faults *store.Faults) *instance.Instance {
	t.Helper()
	return fixture.Instance(t, "edge", func(cfg *config.Config) {
		cfg.HTTP.MaxBodyBytes = 4096
		// Ingest only: these tests read the hooks back, so nothing may deliver and reclaim them.
		cfg.Node.Roles = []string{"edge"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 2), "acme-gh": fixture.LogSource("acme", 1)}
		if mutate != nil {
			mutate(cfg)
		}
	}, faults)
}

// testClient bounds every call a test makes: a request the node leaves hanging fails
// the test well before any record deadline the tests configure (15 s by default).
var testClient = &http.Client{Timeout: 10 * time.Second}

type reply struct {
	status     int
	retryAfter string
	body       map[string]any
	raw        []byte
	err        error // the request or its answer failed; expect fails the test with it
}

// raw sends one raw HTTP/1.1 request and reads the answer; half closes the write side
// after sending when halfClose is set (a client that gave up on its body).
func raw(t *testing.T, addr, req string, halfClose bool) reply {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		_ = c.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	return toReply(t, resp)
}

func toReply(t *testing.T, resp *http.Response) reply {
	t.Helper()
	r := readReply(resp)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r
}

// readReply is toReply for a goroutine a test started: a failure is kept in the reply.
func readReply(resp *http.Response) reply {
	b, err := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), raw: b, err: err}
	if err == nil {
		if err := json.Unmarshal(b, &r.body); err != nil {
			r.err = fmt.Errorf("answer %d is not a JSON object: %q", resp.StatusCode, b)
		}
	}
	return r
}

func postBody(t *testing.T, inst *instance.Instance, path string, body []byte, headers ...string) reply {
	t.Helper()
	r := send(inst, path, body, headers...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r
}

// send is postBody for a goroutine a test started: it never fails the test, the reply
// carries the error to the test goroutine, whose expect reports it.
func send(inst *instance.Instance, path string, body []byte, headers ...string) reply {
	req, err := http.NewRequest(http.MethodPost, "http://"+inst.IngestAddr()+path, bytes.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := testClient.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	return readReply(resp)
}

func (r reply) expect(t *testing.T, status int, reason string) {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.status != status {
		t.Fatalf("status %d (%s), want %d", r.status, r.raw, status)
	}
	if reason != "" && r.body["error"] != reason {
		t.Fatalf("reason %v, want %s (%s)", r.body["error"], reason, r.raw)
	}
}

func hooks(t *testing.T, inst *instance.Instance) []store.Hook {
	t.Helper()
	var out []store.Hook
	// After a failed write the store owner reopens the store: wait out the moment it is closed.
	poll.True(t, 10*time.Second, "the store to be open", func() bool { return inst.Store() != nil })
	if err := inst.Store().ForEachHook(func(_ uint64, h *store.Hook) error {
		out = append(out, *h)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Design: "201 {"status":"accepted","id":<uuidv7>} as the only success. The body is
// stored byte-for-byte." One delivery row per sink is written with the hook.
func TestAcceptedStoresBodyVerbatim(t *testing.T) {
	inst := start(t, nil, nil)
	body := []byte("{\"k\":\"v\"}\n\x00\xff raw bytes \r\n")
	r := postBody(t, inst, "/webhooks/sample", body, "Content-Type", "application/x-thing", "X-Provider-Event", "push",
		"Authorization", "Bearer secret-token", "Cookie", "a=b")
	r.expect(t, 201, "")
	if r.body["status"] != "accepted" || len(r.body) != 2 {
		t.Fatalf("201 body %s", r.raw)
	}
	id, ok := edge.ParseID(r.body["id"].(string))
	if !ok || id[6]>>4 != 7 {
		t.Fatalf("id %v is not a UUIDv7", r.body["id"])
	}
	hs := hooks(t, inst)
	if len(hs) != 1 {
		t.Fatalf("%d hooks stored", len(hs))
	}
	h := hs[0]
	if h.ID != id || !bytes.Equal(h.Body, body) || h.Source != "sample" || h.Tenant != "default" || h.ContentType != "application/x-thing" {
		t.Fatalf("stored hook %+v", h)
	}
	got := map[string]string{}
	for _, hd := range h.Headers {
		got[hd.Name] = hd.Value
	}
	if got["x-provider-event"] != "push" {
		t.Fatalf("provider header not stored: %v", got)
	}
	for _, secret := range []string{"authorization", "cookie", "Authorization"} {
		if _, ok := got[secret]; ok {
			t.Fatalf("credential header %s stored", secret)
		}
	}
	rows := 0
	if err := inst.Store().ForEachDelivery(func(seq uint64, _ store.DeliveryRow) error { rows++; return nil }); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("%d delivery rows for a source with two sinks", rows)
	}
}

// Design: "a source that does not exist is 404 — so is a source owned by one tenant asked
// for under another tenant's URL (a source with the default tenant is shared and
// answers any tenant)".
func TestRouteResolution(t *testing.T) {
	t.Run("path", func(t *testing.T) {
		inst := start(t, nil, nil)
		for _, p := range []string{"/webhooks/nope", "/webhooks/", "/webhooks", "/other/sample", "/webhooks/sample/extra", "/webhooks/bad%20id"} {
			postBody(t, inst, p, []byte("{}")).expect(t, 404, "unknown_source")
		}
		postBody(t, inst, "/webhooks/sample", []byte("{}")).expect(t, 201, "")
	})
	t.Run("tenant_path", func(t *testing.T) {
		inst := start(t, func(c *config.Config) {
			c.HTTP.Routing = "tenant_path"
			// A shared source that verifies nothing takes the URL's tenant only knowingly.
			src := c.Sources["sample"]
			src.TrustURLTenant = true
			c.Sources["sample"] = src
		}, nil)
		postBody(t, inst, "/webhooks/acme/acme-gh", []byte("{}")).expect(t, 201, "")
		postBody(t, inst, "/webhooks/other/acme-gh", []byte("{}")).expect(t, 404, "unknown_source")
		postBody(t, inst, "/webhooks/globex/sample", []byte("{}")).expect(t, 201, "")
		postBody(t, inst, "/webhooks/sample", []byte("{}")).expect(t, 404, "unknown_source")
		tenants := map[string]string{}
		for _, h := range hooks(t, inst) {
			tenants[h.Source] = h.Tenant
		}
		if tenants["acme-gh"] != "acme" || tenants["sample"] != "globex" {
			t.Fatalf("tenants %v: the URL's tenant must be authoritative for a shared source", tenants)
		}
	})
	t.Run("no prefix", func(t *testing.T) {
		inst := start(t, func(c *config.Config) { c.HTTP.Prefix = "/" }, nil)
		postBody(t, inst, "/sample", []byte("{}")).expect(t, 201, "")
	})
}

// Design: "a Content-Length above max_body_bytes is 413 ... Only then does it read the
// body, still bounded by max_body_bytes as it streams (a chunked body has no length to
// check up front)".
func TestBodyCap(t *testing.T) {
	inst := start(t, nil, nil)
	addr := inst.IngestAddr()
	// Only a 4 KiB prefix of the promised 100,000 bytes is sent: a 413 that arrives
	// proves the rest was never awaited (the listener reads at most the first
	// min(max_body_bytes, 8 KiB) with the headers).
	r := raw(t, addr, "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("p", 4096), false)
	r.expect(t, 413, "payload_too_large")
	if r.body["limit"] != float64(4096) {
		t.Fatalf("413 limit %v", r.body["limit"])
	}
	chunk := strings.Repeat("a", 3000)
	chunked := fmt.Sprintf("POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk, len(chunk), chunk)
	raw(t, addr, chunked, false).expect(t, 413, "payload_too_large")
	small := fmt.Sprintf("POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk)
	raw(t, addr, small, false).expect(t, 201, "")
	if hs := hooks(t, inst); len(hs) != 1 || string(hs[0].Body) != chunk {
		t.Fatalf("stored %d hooks; want only the chunked one under the cap", len(hs))
	}
}

// Design: "a body it cannot read at all (client disconnect, read timeout) is 400, kept
// distinct from 413".
func TestBodyReadFailed(t *testing.T) {
	inst := start(t, nil, nil)
	// 20 KiB promised, 10 KiB sent, then the client stops sending.
	req := "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n" + strings.Repeat("b", 100)
	raw(t, inst.IngestAddr(), req, true).expect(t, 400, "body_read_failed")
	if hs := hooks(t, inst); len(hs) != 0 {
		t.Fatalf("a body that could not be read was stored")
	}
}

// Design: "A header name or value holding a byte outside visible ASCII (space and tab
// allowed in values) is also 400 invalid_header, refused before the body is read".
func TestInvalidHeader(t *testing.T) {
	inst := start(t, nil, nil)
	r := raw(t, inst.IngestAddr(), "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nX-Bad: caf\xc3\xa9\r\nContent-Length: 2\r\n\r\n{}", false)
	r.expect(t, 400, "invalid_header")
	if r.body["header"] != "X-Bad" {
		t.Fatalf("invalid_header names %v", r.body["header"])
	}
	raw(t, inst.IngestAddr(), "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nX-Tab: a\tb c\r\nContent-Length: 2\r\n\r\n{}", false).expect(t, 201, "")
}

// Non-POST requests other than the probes are 404 not_found; /health and /ready answer.
func TestProbesAndOtherMethods(t *testing.T) {
	inst := start(t, nil, nil)
	get := func(path string) reply {
		resp, err := testClient.Get("http://" + inst.IngestAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return toReply(t, resp)
	}
	get("/webhooks/sample").expect(t, 404, "not_found")
	h := get("/health")
	h.expect(t, 200, "")
	if h.body["status"] != "ok" || h.body["instance"] != "edge" {
		t.Fatalf("health %s", h.raw)
	}
	r := get("/ready")
	r.expect(t, 200, "")
	if r.body["status"] != "ready" || r.body["store"] != "ok" {
		t.Fatalf("ready %s", r.raw)
	}
}

// hold blocks synced writes until released.
type hold struct {
	entered atomic.Int64
	gate    chan struct{}
	fail    atomic.Bool
}

func newHold() *hold { return &hold{gate: make(chan struct{})} }

func (h *hold) faults() *store.Faults {
	return &store.Faults{BeforeCommit: func() error {
		h.entered.Add(1)
		<-h.gate
		if h.fail.Load() {
			return errors.New("injected write failure")
		}
		return nil
	}}
}

// Design: "The queue is bounded twice — max_queue records and max_queue_bytes of body,
// both counting buffered and in-flight records: full means 503 with Retry-After".
func TestOverload(t *testing.T) {
	h := newHold()
	inst := start(t, func(c *config.Config) { c.Batcher.Partitions = 1; c.Batcher.MaxQueue = 2 }, h.faults())
	done := make(chan reply, 2)
	for range 2 {
		go func() { done <- send(inst, "/webhooks/sample", []byte("{}")) }()
	}
	poll.True(t, 10*time.Second, "two records in flight", func() bool { n, _ := queue(inst); return n == 2 })
	r := postBody(t, inst, "/webhooks/sample", []byte("{}"))
	r.expect(t, 503, "overload")
	if r.retryAfter != "1" {
		t.Fatalf("Retry-After %q", r.retryAfter)
	}
	close(h.gate)
	for range 2 {
		(<-done).expect(t, 201, "")
	}
	if n := len(hooks(t, inst)); n != 2 {
		t.Fatalf("%d hooks stored; the shed one must not be", n)
	}
}

func queue(inst *instance.Instance) (int64, int64) {
	return inst.Edge().Queue()
}

// Design: "Under wal.type: disk that is the store refusing a commit" — a failed synced
// write is 503 store_unavailable with Retry-After, never a 2xx, and /ready reports it.
func TestStoreUnavailable(t *testing.T) {
	h := newHold()
	h.fail.Store(true)
	close(h.gate)
	inst := start(t, nil, h.faults())
	r := postBody(t, inst, "/webhooks/sample", []byte("{}"))
	r.expect(t, 503, "store_unavailable")
	if r.retryAfter != "1" {
		t.Fatalf("Retry-After %q", r.retryAfter)
	}
	resp, err := testClient.Get("http://" + inst.IngestAddr() + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	rr := toReply(t, resp)
	resp.Body.Close()
	rr.expect(t, 503, "")
	if st := rr.body["store"]; st != "write_failed" && st != "store_unavailable" { // store_unavailable: reopening
		t.Fatalf("ready after a failed write: %s", rr.raw)
	}
	if n := len(hooks(t, inst)); n != 0 {
		t.Fatalf("%d hooks stored by a failed write", n)
	}
}

// Design: "A panic drops the message being handled: its caller must see a timeout or a
// 503, never a 2xx." A batcher crashed while it buffers records answers each of them
// 503; the record already handed to the writer is still committed.
func TestCrashedBatcherNeverAcks(t *testing.T) {
	h := newHold()
	inst := start(t, func(c *config.Config) {
		c.Debug.Chaos = true
		c.Batcher.Partitions = 1
		c.Batcher.MaxCommits = 1
		c.Batcher.RecordDeadlineMS = 2000
	}, h.faults())
	done := make(chan reply, 4)
	go func() { done <- send(inst, "/webhooks/sample", []byte(`{"n":0}`)) }()
	poll.True(t, 10*time.Second, "the first group to hold the sync", func() bool { return h.entered.Load() == 1 })
	// The batcher has one batch in flight (max_commits 1): the next two records stay in its buffer.
	for i := 1; i <= 2; i++ {
		go func() { done <- send(inst, "/webhooks/sample", fmt.Appendf(nil, `{"n":%d}`, i)) }()
	}
	poll.True(t, 10*time.Second, "three records in the partition", func() bool { n, _ := queue(inst); return n == 3 })
	inst.Kill().Arm(edge.BatcherName("edge", 0))
	go func() { done <- send(inst, "/webhooks/sample", []byte(`{"n":3}`)) }()
	// The crash answers the buffered records (and the one whose message crashed it) 503.
	for range 3 {
		r := <-done
		if r.status == 201 {
			t.Fatalf("a record dropped by a crashed batcher was answered 201: %s", r.raw)
		}
		r.expect(t, 503, "")
	}
	close(h.gate)
	(<-done).expect(t, 201, "")
	hs := hooks(t, inst)
	if len(hs) != 1 || string(hs[0].Body) != `{"n":0}` {
		t.Fatalf("store holds %d hooks; want only the one that was committing", len(hs))
	}
}

// Design: "A panic drops the message being handled: its caller must see a timeout or a
// 503, never a 2xx", and a crash in the edge costs "ingest unavailable briefly". A batch
// the writer queued when it crashed is answered 503 at once, not at its record deadline:
// the crashed writer's mailbox stays suspended, and rest-for-one stops the listener,
// which waits for that request, before the writer.
func TestCrashedWriterAnswersQueuedRecordsAtOnce(t *testing.T) {
	h := newHold()
	var release sync.Once
	inst := start(t, func(c *config.Config) {
		c.Debug.Chaos = true
		c.Batcher.Partitions = 1
		c.Batcher.MaxBatch = 1
		c.Batcher.RecordDeadlineMS = 60_000 // far beyond the client timeout: a wait for it fails the test
	}, h.faults())
	t.Cleanup(func() { release.Do(func() { close(h.gate) }) }) // runs before the stop: a failed test must not hold it
	type answer struct {
		n   int
		r   reply
		err error
	}
	done := make(chan answer, 3)
	post := func(n int) {
		go func() {
			r, err := postNoFatal(inst, fmt.Appendf(nil, `{"n":%d}`, n))
			done <- answer{n, r, err}
		}()
	}
	post(0)
	poll.True(t, 10*time.Second, "the first group to hold the sync", func() bool { return h.entered.Load() == 1 })
	post(1) // queued in the writer behind the group in flight
	poll.True(t, 10*time.Second, "two records in the partition", func() bool { n, _ := queue(inst); return n == 2 })
	// The writer crashes on the next message it receives: the batch of a third record, while the first group
	// still holds the sync and the second waits in the writer's queue.
	inst.Kill().Arm("edge/edge/writer")
	post(2)
	var got [3]reply
	for range 2 {
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		got[a.n] = a.r
	}
	release.Do(func() { close(h.gate) })
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	got[a.n] = a.r
	got[0].expect(t, 201, "") // the group in flight answers its record: a crash never abandons a started group
	for _, n := range []int{1, 2} {
		if got[n].status == 201 {
			t.Fatalf("record %d, queued in or crashing a writer, was answered 201: %s", n, got[n].raw)
		}
		got[n].expect(t, 503, "store_unavailable")
	}
	hs := hooks(t, inst)
	if len(hs) != 1 || string(hs[0].Body) != `{"n":0}` {
		t.Fatalf("store holds %d hooks; want only the one that was committing", len(hs))
	}
}

// postNoFatal posts body to the sample source; safe from any goroutine.
func postNoFatal(inst *instance.Instance, body []byte) (reply, error) {
	r := send(inst, "/webhooks/sample", body)
	return r, r.err
}

func startB(b *testing.B) *instance.Instance {
	return start(b, func(c *config.Config) { c.Admin.Enabled = false }, nil)
}

// Design: a crash in the edge subtree costs "ingest unavailable briefly; never the store".
// After the writer (or a batcher) is crashed and restarted, every hook commits again — a
// restarted actor needs nothing from its predecessor.
func TestIngestRecoversAfterEdgeCrashes(t *testing.T) {
	for _, victim := range []string{"edge/edge/writer", "edge/edge/batcher-0"} {
		t.Run(victim, func(t *testing.T) {
			port := freePort(t)
			inst := start(t, func(c *config.Config) { c.Debug.Chaos = true; c.HTTP.Port = port; c.Batcher.Partitions = 1 }, nil)
			postBody(t, inst, "/webhooks/sample", []byte(`{"before":1}`)).expect(t, 201, "")
			inst.Kill().Arm(victim)
			deadline := time.Now().Add(5 * time.Second)
			for {
				if r, err := tryPost(inst, port); err == nil && r == 201 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("ingest did not recover within 5 s after %s crashed", victim)
				}
				time.Sleep(5 * time.Millisecond)
			}
			// Concurrent hooks, so that batches queue behind a group in flight.
			done := make(chan reply, 64)
			for i := range 64 {
				go func() { done <- send(inst, "/webhooks/sample", fmt.Appendf(nil, `{"after":%d}`, i)) }()
			}
			for range 64 {
				(<-done).expect(t, 201, "")
			}
		})
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func tryPost(inst *instance.Instance, port int) (int, error) {
	resp, err := testClient.Post(fmt.Sprintf("http://127.0.0.1:%d/webhooks/sample", port), "application/json", strings.NewReader(`{}`))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Each request's record (its value buffer and Done channel) is reused by a later request once the writer has
// answered it. Bodies of varying sizes from concurrent clients are each stored verbatim under their own id:
// a reused buffer never carries an earlier body's bytes into a later hook.
func TestReusedRecordsKeepEachBody(t *testing.T) {
	inst := start(t, func(c *config.Config) { c.Batcher.Partitions = 2 }, nil)
	const clients, each = 4, 60
	sent := make([]map[string][]byte, clients)
	errs := make(chan error, clients)
	for c := range clients {
		sent[c] = map[string][]byte{}
		go func() {
			for i := range each {
				// Sizes go up and down so a kept buffer is sometimes larger, sometimes smaller than the next body.
				body := bytes.Repeat(fmt.Appendf(nil, "c%d-i%d|", c, i), 1+(i*37+c*11)%400)
				r := send(inst, "/webhooks/sample", body)
				if r.err != nil || r.status != 201 {
					errs <- fmt.Errorf("client %d post %d: status %d %s %v", c, i, r.status, r.raw, r.err)
					return
				}
				sent[c][r.body["id"].(string)] = body
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	stored := map[[16]byte][]byte{}
	for _, h := range hooks(t, inst) {
		stored[h.ID] = h.Body
	}
	if len(stored) != clients*each {
		t.Fatalf("%d hooks stored, %d acknowledged", len(stored), clients*each)
	}
	for _, m := range sent {
		for s, body := range m {
			id, _ := edge.ParseID(s)
			if !bytes.Equal(stored[id], body) {
				t.Fatalf("hook %s stored %d bytes %.40q, acknowledged with %d bytes %.40q", s, len(stored[id]), stored[id], len(body), body)
			}
		}
	}
}

// Records whose deadline passed while they waited in the writer's queue are answered 503 and never committed,
// though their batches stay queued until the writer reaches them; the requests that follow them, on scratches
// that keep their records for reuse, are each committed once (TestKeepPendingOnlyWhenAnswered covers which
// records a scratch keeps).
func TestExpiredRecordsStayUncommitted(t *testing.T) {
	h := newHold()
	var release sync.Once
	inst := start(t, func(c *config.Config) {
		c.Batcher.Partitions = 1
		c.Batcher.MaxBatch = 1
		c.Batcher.RecordDeadlineMS = 300
	}, h.faults())
	t.Cleanup(func() { release.Do(func() { close(h.gate) }) })
	first := make(chan reply, 1)
	go func() { first <- send(inst, "/webhooks/sample", []byte(`{"n":0}`)) }()
	poll.True(t, 10*time.Second, "the first group to hold the sync", func() bool { return h.entered.Load() == 1 })
	// Queued behind the held group, these expire one after another; each later request may take the scratch
	// (and the record) of the one before it.
	for i := 1; i <= 4; i++ {
		postBody(t, inst, "/webhooks/sample", fmt.Appendf(nil, `{"n":%d}`, i)).expect(t, 503, "")
	}
	later := make(chan reply, 1)
	go func() { later <- send(inst, "/webhooks/sample", []byte(`{"n":5}`)) }()
	poll.True(t, 10*time.Second, "the last record queued", func() bool { n, _ := queue(inst); return n >= 2 })
	release.Do(func() { close(h.gate) })
	(<-first).expect(t, 201, "")
	// The last one may have expired too (the hold outlived its deadline): either it is stored once or not at all.
	last := <-later
	want := map[string]bool{`{"n":0}`: true}
	if last.status == 201 {
		want[`{"n":5}`] = true
	} else {
		last.expect(t, 503, "")
	}
	hs := hooks(t, inst)
	got := map[string]int{}
	for _, x := range hs {
		got[string(x.Body)]++
	}
	if len(hs) != len(want) {
		t.Fatalf("store holds %d hooks %v; want %v", len(hs), got, want)
	}
	for b := range want {
		if got[b] != 1 {
			t.Fatalf("store holds %v; want each of %v once", got, want)
		}
	}
}

// A batcher at max_commits waits for room, and the batch that finishes wakes it: the records it buffered
// meanwhile are committed as soon as the writer is done with the one in flight, not at their deadline.
func TestBatcherAtMaxCommitsResumesWhenABatchFinishes(t *testing.T) {
	h := newHold()
	inst := start(t, func(c *config.Config) {
		c.Batcher.Partitions = 1
		c.Batcher.MaxCommits = 1
		c.Batcher.RecordDeadlineMS = 60_000 // far beyond the wait below: only the wake-up can answer in time
	}, h.faults())
	done := make(chan reply, 3)
	go func() { done <- send(inst, "/webhooks/sample", []byte(`{"n":0}`)) }()
	poll.True(t, 10*time.Second, "the first group to hold the sync", func() bool { return h.entered.Load() == 1 })
	for i := 1; i <= 2; i++ {
		go func() { done <- send(inst, "/webhooks/sample", fmt.Appendf(nil, `{"n":%d}`, i)) }()
	}
	poll.True(t, 10*time.Second, "two records waiting in the batcher", func() bool { n, _ := queue(inst); return n == 3 })
	close(h.gate)
	for range 3 {
		select {
		case r := <-done:
			r.expect(t, 201, "")
		case <-time.After(10 * time.Second):
			t.Fatal("records buffered at max_commits were not committed once the batch in flight finished")
		}
	}
	if n := len(hooks(t, inst)); n != 3 {
		t.Fatalf("store holds %d hooks, want 3", n)
	}
}
