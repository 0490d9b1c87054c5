package test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/load"
	"github.com/ankusa-go/ankusa/test/poll"
)

// instanceConfig is one instance of a multi-instance process; the last %s is its debug section.
const instanceConfig = `instance: %s
node:
  data_dir: %s
  roles: [edge]
http:
  ip: 127.0.0.1
  port: %d
admin:
  port: %d
listener:
  drain_delay_ms: 0
%s` + logSources

// acked records the hooks one instance answered 201: id → sha256 of the body sent.
type acked struct {
	mu  sync.Mutex
	ids map[[16]byte][32]byte
	t   *testing.T
}

func (a *acked) accepted(id string, body []byte) {
	raw, ok := edge.ParseID(id)
	if !ok {
		a.t.Errorf("201 with a malformed id %q", id)
		return
	}
	sum := sha256.Sum256(body)
	a.mu.Lock()
	a.ids[raw] = sum
	a.mu.Unlock()
}

func (a *acked) count() int { a.mu.Lock(); defer a.mu.Unlock(); return len(a.ids) }

// TestInstancesFailAloneAndSurviveKill9 runs the binary with two instance configs (the
// seed's first "used by": several instances in one process, each with its own ports,
// data dir and actor tree). Both ingest; the core of one is made to crash past its
// restart budget (debug.kill_file crashes its writer on every batch): that instance
// stops alone, its ports close, and the other keeps acking. Then the process is killed
// with SIGKILL under load, restarted with both configs, and every hook either instance
// answered 201 is in its store with its body.
func TestInstancesFailAloneAndSurviveKill9(t *testing.T) {
	dataDir := t.TempDir()
	confDir := filepath.Join(dataDir, "conf")
	if err := os.Mkdir(confDir, 0o700); err != nil {
		t.Fatal(err)
	}
	killFile := filepath.Join(dataDir, "kill-a")
	ports := map[string][2]int{"a": {freePort(t), freePort(t)}, "b": {freePort(t), freePort(t)}}
	for name, p := range ports {
		debug := ""
		if name == "a" {
			debug = "debug:\n  chaos: true\n  kill_file: " + killFile + "\n"
		}
		cfg := fmt.Sprintf(instanceConfig, name, dataDir, p[0], p[1], debug)
		if err := os.WriteFile(filepath.Join(confDir, name+".yml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := func() (a, b *node) {
		a = &node{t: t, port: ports["a"][0], admin: ports["a"][1], exited: make(chan struct{})}
		launch(t, a, exec.Command(binary, "serve", "-c", confDir), filepath.Join(confDir, "a.yml"), "multi", dataDir)
		// The same process serves b: waiting for its /ready needs no second launch.
		b = &node{t: t, cmd: a.cmd, port: ports["b"][0], admin: ports["b"][1], logPath: a.logPath, exited: a.exited}
		poll.Eventually(t, 30*time.Second, func() error {
			resp, err := testClient.Get(b.url("/ready"))
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("b ready: %d", resp.StatusCode)
			}
			return nil
		})
		return a, b
	}
	a, b := start()

	ackA := &acked{ids: make(map[[16]byte][32]byte), t: t}
	ackB := &acked{ids: make(map[[16]byte][32]byte), t: t}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan string, 2)
	var drivers sync.WaitGroup
	for _, d := range []struct {
		name string
		n    *node
		ack  *acked
	}{{"a", a, ackA}, {"b", b, ackB}} {
		drivers.Add(1)
		go func() {
			defer drivers.Done()
			// An open loop: a dead port is dialled at the rate, not in a spin.
			rep, _ := load.Run(ctx, load.Options{URL: d.n.url("/webhooks/sample"), Workers: 32, Rate: 400,
				Duration: 2 * time.Minute, BodyBytes: 512, Timeout: 20 * time.Second, OnAccepted: d.ack.accepted})
			reports <- d.name + ": " + rep.String()
		}()
	}
	stopLoad := func() {
		cancel()
		drivers.Wait()
		close(reports)
		for r := range reports {
			t.Logf("load %s", r)
		}
	}
	poll.Eventually(t, 60*time.Second, func() error {
		if ackA.count() < 500 || ackB.count() < 500 {
			return fmt.Errorf("acked a=%d b=%d", ackA.count(), ackB.count())
		}
		return nil
	})

	// Crash a's writer on every batch until its core gives up.
	if err := os.WriteFile(killFile, []byte("edge/writer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	crashed := time.Now()
	poll.Eventually(t, 60*time.Second, func() error {
		if !strings.Contains(a.log(), "instance stopped; the others serve on") {
			return errNotYet
		}
		return nil
	})
	gone := time.Since(crashed)
	// a's ports are closed for good; b serves on and keeps acking.
	for _, port := range ports["a"] {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			t.Fatalf("port %d of the stopped instance still accepts", port)
		}
	}
	ackedA, fromB := ackA.count(), ackB.count()
	poll.Eventually(t, 30*time.Second, func() error {
		if ackB.count() < fromB+500 {
			return fmt.Errorf("b acked %d since a stopped", ackB.count()-fromB)
		}
		return nil
	})
	select {
	case <-a.exited:
		t.Fatalf("the process exited with one instance still serving; log:\n%s", a.log())
	default:
	}
	if ackA.count() != ackedA {
		t.Fatalf("the stopped instance acked %d more hooks", ackA.count()-ackedA)
	}
	t.Logf("a stopped %v after its writer began crashing, with %d hooks acked; b acked %d more since", gone.Round(time.Millisecond), ackedA, ackB.count()-fromB)

	// SIGKILL under load, then restart both and read their stores.
	a.kill()
	time.Sleep(100 * time.Millisecond)
	stopLoad()
	if err := os.Remove(killFile); err != nil {
		t.Fatal(err)
	}
	a2, _ := start()
	if err := a2.stop(); err != nil {
		t.Fatal(err)
	}
	for name, ack := range map[string]*acked{"a": ackA, "b": ackB} {
		db, err := store.Open(store.Options{Dir: filepath.Join(dataDir, name, "store")})
		if err != nil {
			t.Fatalf("reopen %s's store: %v", name, err)
		}
		stored := make(map[[16]byte][32]byte)
		err = db.ForEachHook(func(_ uint64, h *store.Hook) error {
			stored[h.ID] = sha256.Sum256(h.Body)
			return nil
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		missing, mismatched := 0, 0
		for id, sum := range ack.ids {
			got, ok := stored[id]
			switch {
			case !ok:
				missing++
			case got != sum:
				mismatched++
			}
		}
		t.Logf("%s: acked=%d stored=%d missing=%d body_mismatches=%d", name, len(ack.ids), len(stored), missing, mismatched)
		if missing != 0 || mismatched != 0 {
			t.Errorf("%s: %d acked hooks missing and %d with a different body after kill -9", name, missing, mismatched)
		}
	}
}
