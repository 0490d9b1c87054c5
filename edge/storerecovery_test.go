package edge_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/poll"
)

// ready reads the ingest listener's /ready: its status and the store check's value.
func ready(inst *instance.Instance) (int, string, error) {
	resp, err := testClient.Get("http://" + inst.IngestAddr() + "/ready")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var body struct {
		Store string `json:"store"`
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, "", err
	}
	if err := json.Unmarshal(buf.Bytes(), &body); err != nil {
		return resp.StatusCode, "", err
	}
	return resp.StatusCode, body.Store, nil
}

// value reads a counter's or gauge's value.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// fastReopen shortens the reopen back-off so a test sees several tries.
func fastReopen(c *config.Config) {
	c.Store.ReopenMinMS = 100
	c.Store.ReopenMaxMS = 400
}

// Inventory E.1: "A failed write from any process asks the store to reopen (≤ once / 5 s); a closed store
// retries open after 5, 10, 20, 40, 60 s". While writes fail ingest answers 503 store_unavailable and /ready
// stays 503 (not for a fixed 5 s); once the store takes a write again the node recovers by itself, with no
// request needed to find out, and ankusa_store_unavailable_seconds measured the outage.
func TestFailedWriteRecoversByItself(t *testing.T) {
	t.Run("edge", func(t *testing.T) { failedWriteRecovers(t, []string{"edge"}) })
	// Dispatch holds the store too: the reopen closes its handle under it, and it must take the new one.
	t.Run("edge+dispatch", func(t *testing.T) { failedWriteRecovers(t, []string{"edge", "dispatch"}) })
}

func failedWriteRecovers(t *testing.T, roles []string) {
	var fail atomic.Bool
	fail.Store(true)
	faults := &store.Faults{BeforeCommit: func() error {
		if fail.Load() {
			return errors.New("IO error: injected write failure")
		}
		return nil
	}}
	inst := start(t, func(c *config.Config) { fastReopen(c); c.Node.Roles = roles }, faults)
	m := inst.Telemetry().Metrics
	postBody(t, inst, "/webhooks/sample", []byte(`{"n":1}`)).expect(t, 503, "store_unavailable")
	// Several reopens fail their probe; /ready stays 503 all along, past the old 5 s of quiet.
	poll.True(t, 20*time.Second, "three failed reopen probes", func() bool {
		return value(m.StoreReopens.WithLabelValues("ok")) >= 3
	})
	if code, st, err := ready(inst); err != nil || code != 503 || (st != "write_failed" && st != "store_unavailable") {
		t.Fatalf("/ready while writes fail: %d %q %v", code, st, err)
	}
	postBody(t, inst, "/webhooks/sample", []byte(`{"n":2}`)).expect(t, 503, "store_unavailable")
	poll.True(t, 10*time.Second, "ankusa_store_unavailable_seconds > 0", func() bool {
		return value(m.StoreUnavailable) > 0
	})

	fail.Store(false)
	poll.Eventually(t, 20*time.Second, func() error {
		if code, st, err := ready(inst); err != nil || code != 200 {
			return fmt.Errorf("/ready %d %q %v", code, st, err)
		}
		return nil
	})
	postBody(t, inst, "/webhooks/sample", []byte(`{"n":3}`)).expect(t, 201, "")
	poll.True(t, 10*time.Second, "ankusa_store_unavailable_seconds back to 0", func() bool {
		return value(m.StoreUnavailable) == 0
	})
	if len(roles) > 1 {
		return // dispatch delivers and reclaims the hook
	}
	if hs := hooks(t, inst); len(hs) != 1 || string(hs[0].Body) != `{"n":3}` {
		t.Fatalf("store holds %d hooks, want only the one accepted", len(hs))
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts it when the test ends (after
// whatever cleanup is registered later, such as the instance's stop). It skips the test where mounting is
// impossible (not root, no CAP_SYS_ADMIN), except under CI=true, where CI runs as root and a skip would
// hide the full-disk proof.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot mount a tmpfs under CI (%v): the full-disk test needs root or CAP_SYS_ADMIN", err)
		}
		t.Skipf("cannot mount a tmpfs here (%v): the full-disk test needs root or CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes path until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				// Fill the last partial page too.
				for _, n := range []int{4096, 512, 64, 1} {
					for {
						if _, err := f.Write(chunk[:n]); err != nil {
							break
						}
					}
				}
				return
			}
			t.Fatal(err)
		}
	}
}

// Inventory E.1 with a real full disk: the store lives on a small tmpfs; filling it makes POSTs 503
// store_unavailable and /ready 503; freeing space lets the node recover by itself (reopen, probe) and POSTs get
// 201 again, and every hook acknowledged before, during and after is in the store.
func TestFullDiskRecoversByItself(t *testing.T) {
	dir := mountTmpfs(t, 16<<20)
	inst := start(t, func(c *config.Config) {
		fastReopen(c)
		c.Node.DataDir = dir
	}, nil)
	var acked [][16]byte
	post := func(n int) reply {
		r := postBody(t, inst, "/webhooks/sample", fmt.Appendf(nil, `{"n":%d,"pad":"%0900d"}`, n, 0))
		if r.status == 201 {
			id, ok := edge.ParseID(fmt.Sprint(r.body["id"]))
			if !ok {
				t.Fatalf("201 without a hook id: %s", r.raw)
			}
			acked = append(acked, id)
		}
		return r
	}
	post(0).expect(t, 201, "")

	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	// Whatever RocksDB preallocated may still take a few writes; past it every POST is refused.
	n := 1
	for ; ; n++ {
		r := post(n)
		if r.status == 503 {
			r.expect(t, 503, "store_unavailable")
			break
		}
		r.expect(t, 201, "")
		if n > 5000 {
			t.Fatal("the store kept accepting hooks on a full filesystem")
		}
	}
	t.Logf("full after %d accepted hooks", n-1)
	poll.Eventually(t, 10*time.Second, func() error {
		if code, st, err := ready(inst); err != nil || code != 503 {
			return fmt.Errorf("/ready on a full disk: %d %q %v", code, st, err)
		}
		return nil
	})
	post(n+1).expect(t, 503, "store_unavailable")
	if code, _, err := ready(inst); err != nil || code != 503 {
		t.Fatalf("/ready turned %d (%v) while the disk is still full", code, err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 30*time.Second, func() error {
		if code, st, err := ready(inst); err != nil || code != 200 {
			return fmt.Errorf("/ready after space was freed: %d %q %v", code, st, err)
		}
		return nil
	})
	post(n+2).expect(t, 201, "")
	stored := map[[16]byte]bool{}
	for _, h := range hooks(t, inst) {
		stored[h.ID] = true
	}
	for _, id := range acked {
		if !stored[id] {
			t.Fatalf("acknowledged hook %x lost (%d acknowledged, %d stored)", id, len(acked), len(stored))
		}
	}
}

// A hung fsync must not hide behind a live /ready: a commit running longer than store.commit_stall_ms flips
// /ready to 503 commit_stalled and is counted once in ankusa_store_commit_stalls_total. Its caller is not
// answered meanwhile (a started group may still land, design: "A batch the writer has started is never
// abandoned"); when the sync returns the hook is 201 and /ready 200 again.
func TestStalledCommitFlipsReadiness(t *testing.T) {
	h := newHold() // BeforeCommit blocks inside the synced write path until the gate opens
	var release sync.Once
	inst := start(t, func(c *config.Config) { c.Store.CommitStallMS = 200 }, h.faults())
	t.Cleanup(func() { release.Do(func() { close(h.gate) }) })
	m := inst.Telemetry().Metrics
	done := make(chan reply, 1)
	go func() { done <- send(inst, "/webhooks/sample", []byte(`{"n":1}`)) }()
	poll.True(t, 10*time.Second, "the commit to hold", func() bool { return h.entered.Load() == 1 })
	poll.Eventually(t, 10*time.Second, func() error {
		if code, st, err := ready(inst); err != nil || code != 503 || st != "commit_stalled" {
			return fmt.Errorf("/ready during a stalled commit: %d %q %v", code, st, err)
		}
		return nil
	})
	if v := value(m.CommitStalls); v != 1 {
		t.Fatalf("ankusa_store_commit_stalls_total = %v during one stall, want 1", v)
	}
	select {
	case r := <-done:
		t.Fatalf("the caller of a started group was answered during the stall: %d %s", r.status, r.raw)
	default:
	}
	release.Do(func() { close(h.gate) })
	(<-done).expect(t, 201, "")
	poll.Eventually(t, 10*time.Second, func() error {
		if code, st, err := ready(inst); err != nil || code != 200 {
			return fmt.Errorf("/ready after the stall: %d %q %v", code, st, err)
		}
		return nil
	})
	if v := value(m.CommitStalls); v != 1 {
		t.Fatalf("ankusa_store_commit_stalls_total = %v after one stall, want 1", v)
	}
}
