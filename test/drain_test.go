package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// drainConfig is a node whose writer can be stalled from outside (debug.hold_commits_file),
// with a short drain delay and record deadline so the test runs in seconds.
const drainConfig = `instance: %s
node:
  data_dir: %s
  roles: [edge]
http:
  ip: 127.0.0.1
  port: %d
admin:
  port: %d
listener:
  drain_delay_ms: 1000
batcher:
  record_deadline_ms: 4000
debug:
  hold_commits_file: %s
` + logSources

// TestDrainAnswersEveryRequest proves the seed's Shutdown row: "/ready answers 503
// {"status":"draining"} at once, the ingest listener keeps serving for
// listener.drain_delay_ms, then closes and waits for the requests it is serving [...]
// Every request in flight is answered 201 (stored) or 503 (nothing stored), never reset,
// and every 201 is in the store after the restart." The binary runs as a child; 200
// requests are held in flight by a stalled writer when it gets SIGTERM.
func TestDrainAnswersEveryRequest(t *testing.T) {
	const name, requests = "drain", 200
	dataDir := t.TempDir()
	hold := filepath.Join(dataDir, "hold")
	n := &node{t: t, port: freePort(t), admin: freePort(t), exited: make(chan struct{})}
	cfgPath := filepath.Join(dataDir, name+".yml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(drainConfig, name, dataDir, n.port, n.admin, hold)), 0o600); err != nil {
		t.Fatal(err)
	}
	launch(t, n, exec.Command(binary, "serve"), cfgPath, name, dataDir)

	// Stall the writer, then put 200 requests in flight, each on its own connection.
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answers := make([]answer, requests)
	var sent atomic.Int32
	var wg sync.WaitGroup
	send := func(from, to int) {
		for k := from; k < to; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { sent.Add(1) }}
				ctx := httptrace.WithClientTrace(context.Background(), trace)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url("/webhooks/sample"),
					bytes.NewReader([]byte(`{"n":`+strconv.Itoa(k)+`}`)))
				if err != nil {
					answers[k].err = err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					answers[k].err = err
					return
				}
				defer resp.Body.Close()
				answers[k].status = resp.StatusCode
				answers[k].body, answers[k].err = io.ReadAll(resp.Body)
			}()
		}
		poll.Eventually(t, 30*time.Second, func() error {
			if got := int(sent.Load()); got < to {
				return fmt.Errorf("%d of %d requests written", got, to)
			}
			return nil
		})
	}
	// Two waves, 3 s apart under a 4 s record deadline: when the writer is released (5 s
	// after the first wave), the first wave is past its deadline (503, nothing stored) and
	// the second is not (201), so the drain ends with both answers.
	first := time.Now()
	send(0, requests/2)
	time.Sleep(3*time.Second - time.Since(first))
	send(requests/2, requests)

	// SIGTERM: /ready turns 503 draining at once, while the listener still serves.
	signalled := time.Now()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var readyAfter time.Duration
	poll.Eventually(t, 2*time.Second, func() error {
		resp, err := testClient.Get(n.url("/ready"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || string(body) != `{"status":"draining"}` {
			return fmt.Errorf("ready: %d %s", resp.StatusCode, body)
		}
		readyAfter = time.Since(signalled)
		return nil
	})
	// After listener.drain_delay_ms the port stops accepting; the held requests still wait.
	poll.Eventually(t, 10*time.Second, func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(n.port), time.Second)
		if err == nil {
			c.Close()
			return errNotYet
		}
		return nil
	})
	closedAfter := time.Since(signalled)
	time.Sleep(time.Until(first.Add(5 * time.Second)))
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	select {
	case <-n.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("node did not exit after the drain; log:\n%s", n.log())
	}
	if code := n.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("node exited %d after SIGTERM; log:\n%s", code, n.log())
	}

	accepted := make(map[[16]byte]bool)
	refused, failed := 0, 0
	for k, a := range answers {
		switch {
		case a.err != nil:
			failed++
			t.Errorf("request %d: no answer: %v", k, a.err)
		case a.status == http.StatusCreated:
			var r struct {
				ID string `json:"id"`
			}
			raw, ok := [16]byte{}, false
			if json.Unmarshal(a.body, &r) == nil {
				raw, ok = edge.ParseID(r.ID)
			}
			if !ok {
				t.Errorf("request %d: 201 without a hook id: %s", k, a.body)
				continue
			}
			accepted[raw] = true
		case a.status == http.StatusServiceUnavailable:
			refused++
		default:
			t.Errorf("request %d: %d %s, want 201 or 503", k, a.status, a.body)
		}
	}
	t.Logf("ready draining after %v, listener closed after %v; answers: 201=%d 503=%d no_answer=%d",
		readyAfter.Round(time.Millisecond), closedAfter.Round(time.Millisecond), len(accepted), refused, failed)

	// Restart on the same data dir, then read the store: every 201 is there.
	n2 := startNode(t, name, dataDir)
	if err := n2.stop(); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(store.Options{Dir: filepath.Join(dataDir, name, "store")})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	defer db.Close()
	stored, all := 0, 0
	if err := db.ForEachHook(func(_ uint64, h *store.Hook) error {
		all++
		if accepted[h.ID] {
			stored++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("201 ids stored after restart: %d of %d; hooks in the store: %d", stored, len(accepted), all)
	if stored != len(accepted) {
		t.Fatalf("%d hooks answered 201 are missing after the restart", len(accepted)-stored)
	}
	if all != stored {
		t.Fatalf("%d hooks stored that were answered 503 (a 503 must store nothing)", all-stored)
	}
	if len(accepted) == 0 || refused == 0 {
		t.Fatalf("the drain should end with both kinds of answer (201=%d 503=%d): the test no longer holds what it means to", len(accepted), refused)
	}
}

// The seed's Shutdown row: "the ingest listener keeps serving for listener.drain_delay_ms,
// then closes [...] never reset". During the delay every answer closes its connection, so
// no keep-alive connection is left idle for the listener's close to cut under a request.
func TestDrainClosesKeepAliveConnections(t *testing.T) {
	inst := fixture.Instance(t, "drainka", func(c *config.Config) {
		c.Node.Roles = []string{config.RoleEdge}
		c.Listener.DrainDelayMS = 60_000
		c.Sources = map[string]config.Source{"sample": fixture.LogSource("acme", 1)}
	}, nil)
	url := "http://" + inst.IngestAddr() + "/webhooks/sample"
	postKeepAlive := func() *http.Response {
		t.Helper()
		resp, err := testClient.Post(url, "application/json", strings.NewReader(`{"k":1}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := postKeepAlive(); resp.StatusCode != http.StatusCreated || resp.Close {
		t.Fatalf("before the drain: %d, connection close %v; want 201 on a kept-alive connection", resp.StatusCode, resp.Close)
	}

	ctx, cancel := context.WithCancel(context.Background())
	drained := make(chan error, 1)
	go func() { drained <- inst.Drain(ctx) }()
	poll.Eventually(t, 5*time.Second, func() error {
		resp, err := testClient.Get("http://" + inst.IngestAddr() + "/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			return fmt.Errorf("ready: %d", resp.StatusCode)
		}
		return nil
	})
	if resp := postKeepAlive(); resp.StatusCode != http.StatusCreated || !resp.Close {
		t.Fatalf("during the drain delay: %d, connection close %v; want 201 closing the connection", resp.StatusCode, resp.Close)
	}
	cancel() // ends the delay
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
}
