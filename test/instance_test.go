package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// startInstance runs one instance in this process, ingest only unless mutate asks for
// more: the tests read acked hooks back from the store.
func startInstance(t testing.TB, name string, mutate func(*config.Config), faults *store.Faults) *instance.Instance {
	t.Helper()
	return fixture.Instance(t, name, func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
		if mutate != nil {
			mutate(cfg)
		}
	}, faults)
}

func ingestURL(inst *instance.Instance, path string) string {
	return "http://" + inst.IngestAddr() + path
}

type ack struct {
	Status string `json:"status"`
	ID     string `json:"id"`
	Error  string `json:"error"`
}

func decodeAck(t testing.TB, body []byte) ack {
	t.Helper()
	var a ack
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("answer is not JSON: %q", body)
	}
	return a
}

func storedIDs(t testing.TB, inst *instance.Instance) map[[16]byte]uint64 {
	t.Helper()
	ids, err := inst.Store().HookIDs()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestTwoInstancesOneProcess proves there is no process-wide state (design: "two
// instances with different data dirs and ports run in one process"): hooks posted to
// each instance land in its own store only.
func TestTwoInstancesOneProcess(t *testing.T) {
	a := startInstance(t, "alpha", nil, nil)
	b := startInstance(t, "beta", nil, nil)
	if a.IngestAddr() == b.IngestAddr() {
		t.Fatal("two instances share a listener")
	}
	sent := map[*instance.Instance][][16]byte{}
	for i := range 40 {
		inst := a
		if i%2 == 1 {
			inst = b
		}
		status, body, err := post(context.Background(), ingestURL(inst, "/webhooks/sample"), fmt.Appendf(nil, `{"n":%d}`, i))
		if err != nil || status != 201 {
			t.Fatalf("post %d: %d %s %v", i, status, body, err)
		}
		id, ok := edge.ParseID(decodeAck(t, body).ID)
		if !ok {
			t.Fatalf("bad id in %s", body)
		}
		sent[inst] = append(sent[inst], id)
	}
	for inst, other := range map[*instance.Instance]*instance.Instance{a: b, b: a} {
		ids := storedIDs(t, inst)
		if len(ids) != len(sent[inst]) {
			t.Errorf("%s holds %d hooks, was sent %d", inst.Config().Instance, len(ids), len(sent[inst]))
		}
		for _, id := range sent[inst] {
			if _, ok := ids[id]; !ok {
				t.Errorf("%s lost an acked hook", inst.Config().Instance)
			}
		}
		for _, id := range sent[other] {
			if _, ok := ids[id]; ok {
				t.Errorf("%s holds a hook sent to %s", inst.Config().Instance, other.Config().Instance)
			}
		}
	}
}

// holdSync is a store fault that blocks every synced write until released.
type holdSync struct {
	entered  atomic.Int64
	release  chan struct{}
	once     sync.Once
	released atomic.Bool
}

func newHoldSync() *holdSync { return &holdSync{release: make(chan struct{})} }

func (h *holdSync) faults() *store.Faults {
	return &store.Faults{BeforeCommit: func() error {
		if h.released.Load() {
			return nil
		}
		h.entered.Add(1)
		<-h.release
		return nil
	}}
}

func (h *holdSync) Release() { h.once.Do(func() { h.released.Store(true); close(h.release) }) }

type answer struct {
	status int
	body   []byte
	err    error
}

// postAll sends n hooks concurrently and returns their answers on a channel.
func postAll(url string, n int, body func(i int) []byte) <-chan answer {
	out := make(chan answer, n)
	for i := range n {
		go func() {
			s, b, err := post(context.Background(), url, body(i))
			out <- answer{s, b, err}
		}()
	}
	return out
}

// TestNoAckBeforeSync proves the group commit is honest (design: "201 only after the
// caller's group is synced"): while the synced write is held, no request gets a 2xx;
// once it is released, every waiting request gets its 201 and its hook is readable.
func TestNoAckBeforeSync(t *testing.T) {
	hold := newHoldSync()
	defer hold.Release()
	inst := startInstance(t, "nosync", nil, hold.faults())

	const n = 50
	answers := postAll(ingestURL(inst, "/webhooks/sample"), n, func(i int) []byte { return fmt.Appendf(nil, `{"held":%d}`, i) })
	poll.Eventually(t, 10*time.Second, func() error {
		if hold.entered.Load() == 0 {
			return errNotYet
		}
		return nil
	})
	// The sync is held: no answer may arrive, whatever the wait.
	select {
	case a := <-answers:
		t.Fatalf("answered %d %s while the synced write was held", a.status, a.body)
	case <-time.After(500 * time.Millisecond):
	}
	if ids := storedIDs(t, inst); len(ids) != 0 {
		t.Fatalf("%d hooks readable before the sync returned", len(ids))
	}
	hold.Release()
	ids := map[[16]byte]bool{}
	for range n {
		a := <-answers
		if a.err != nil || a.status != 201 {
			t.Fatalf("after release: %d %s %v", a.status, a.body, a.err)
		}
		id, _ := edge.ParseID(decodeAck(t, a.body).ID)
		ids[id] = true
	}
	stored := storedIDs(t, inst)
	for id := range ids {
		if _, ok := stored[id]; !ok {
			t.Fatalf("acked hook %x not readable", id)
		}
	}
}

// TestDeadlineNeverAcksLater proves the record deadline (design: "a record still
// buffered at its deadline behind a stalled commit is answered 503 and dropped ... A
// batch the writer has started is never abandoned"): with the first group's sync held
// past the deadline, the records queued behind it are answered 503 and never stored,
// while the started group is waited out and acked.
func TestDeadlineNeverAcksLater(t *testing.T) {
	hold := newHoldSync()
	defer hold.Release()
	inst := startInstance(t, "deadline", func(c *config.Config) {
		c.Batcher.RecordDeadlineMS = 400
		c.Batcher.Partitions = 1
	}, hold.faults())
	url := ingestURL(inst, "/webhooks/sample")

	first := postAll(url, 1, func(int) []byte { return []byte(`{"first":true}`) })
	poll.Eventually(t, 10*time.Second, func() error {
		if hold.entered.Load() == 0 {
			return errNotYet
		}
		return nil
	})
	const queued = 20
	behind := postAll(url, queued, func(i int) []byte { return fmt.Appendf(nil, `{"behind":%d}`, i) })
	for range queued {
		a := <-behind
		if a.err != nil || a.status != 503 || decodeAck(t, a.body).Error != "deadline_exceeded" {
			t.Fatalf("queued record past its deadline: %d %s %v", a.status, a.body, a.err)
		}
	}
	// The started group is still held; its caller has not been answered.
	select {
	case a := <-first:
		t.Fatalf("held record answered %d before its sync returned", a.status)
	default:
	}
	hold.Release()
	a := <-first
	if a.err != nil || a.status != 201 {
		t.Fatalf("started group: %d %s %v", a.status, a.body, a.err)
	}
	var bodies [][]byte
	if err := inst.Store().ForEachHook(func(_ uint64, h *store.Hook) error {
		bodies = append(bodies, bytes.Clone(h.Body))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 1 || !bytes.Equal(bodies[0], []byte(`{"first":true}`)) {
		t.Fatalf("store holds %q; want only the started group's hook", bodies)
	}
	// New hooks commit normally afterwards.
	status, body, err := post(context.Background(), url, []byte(`{"later":1}`))
	if err != nil || status != 201 {
		t.Fatalf("after release: %d %s %v", status, body, err)
	}
}
