package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/test/fixture/s3fake"
	"github.com/ankusa-go/ankusa/test/poll"
)

// TestHostLossRestore proves the recovery point of wal.type disk with backups (design: "A node that starts on
// an empty data_dir restores the latest one before it opens the store"; "Hooks acked after the last backup
// are lost with the box"): node A backs up to an S3 service every 500 ms while its HTTP sink is down, takes
// hooks, and is killed with SIGKILL once a backup newer than the last ack exists. Node B, on an empty data
// dir with the same backup config, restores that backup and, once the sink is up, delivers every hook A acked.
func TestHostLossRestore(t *testing.T) {
	s3 := s3fake.Start(t)
	const prefix = "node-a/"

	// The sink's address refuses connections until the recorder starts on it after A is gone. The breaker is
	// off: rows A parked behind an open breaker would wait out its 30 s on B, which proves nothing more.
	sinkPort := freePort(t)
	sinkURL := "http://127.0.0.1:" + strconv.Itoa(sinkPort) + "/hook"
	sources := fmt.Sprintf(`sources:
  sample:
    sinks:
      - type: http
        url: %s
    retry:
      base_ms: 100
      max_ms: 500
      max_attempts: 10000
dispatch:
  breaker_failures: 0
backup:
  enabled: true
  interval_ms: 500
  keep: 2
  signing_key: "host-loss-test-signing-key"
  store:
%s`, sinkURL, s3.YAML(prefix, 4))

	t0 := time.Now()
	a := startNodeWith(t, "hostloss", t.TempDir(), sources)
	const n = 200
	acked := make(map[string]bool, n)
	var lastAck time.Time
	for i := range n {
		status, body, err := post(context.Background(), a.url("/webhooks/sample"), fmt.Appendf(nil, `{"n":%d}`, i))
		if err != nil || status != http.StatusCreated {
			t.Fatalf("post %d: %d %s %v", i, status, body, err)
		}
		var ack struct{ ID string }
		if err := json.Unmarshal(body, &ack); err != nil || ack.ID == "" {
			t.Fatalf("ack %d: %s", i, body)
		}
		acked[ack.ID] = true
		lastAck = time.Now()
	}

	// Wait for a backup taken after the last ack: its id is a ULID, whose time is when its checkpoint began.
	store, err := blob.Open(context.Background(), s3.BlobStore(prefix))
	if err != nil {
		t.Fatal(err)
	}
	var latest ulid.ULID
	poll.Eventually(t, 30*time.Second, func() error {
		rc, err := store.Get(context.Background(), "backup/LATEST")
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		id, err := ulid.ParseStrict(strings.TrimSpace(string(b)))
		if err != nil {
			return err
		}
		if ulid.Time(id.Time()).Before(lastAck) {
			return fmt.Errorf("latest backup %s predates the last ack", id)
		}
		latest = id
		return nil
	})
	t.Logf("phase: A up, acked, backed up: %v", time.Since(t0))
	a.kill() // the host is gone: nothing of A's data dir is used again

	// The sink comes up with the replacement node (A is gone: whatever it receives, B sent).
	rec := &recorder{seen: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(sinkPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(rec)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	b := startNodeWith(t, "hostloss", t.TempDir(), sources)
	if !strings.Contains(b.log(), "store restored from backup") || !strings.Contains(b.log(), latest.String()) {
		t.Fatalf("node B did not log the restore of %s; log:\n%s", latest, b.log())
	}

	t.Logf("phase: B restored and ready: %v", time.Since(t0))

	poll.Eventually(t, 60*time.Second, func() error {
		missing := 0
		for id := range acked {
			if !rec.has(id) {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acked hooks not delivered yet", missing, len(acked))
		}
		return nil
	})
	t.Logf("phase: delivered: %v", time.Since(t0))
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("acked on A: %d; restored backup %s (taken %v after the last ack); delivered from B: %d distinct ids",
		len(acked), latest, ulid.Time(latest.Time()).Sub(lastAck).Round(time.Millisecond), rec.distinct())
}

// recorder is an HTTP sink destination that records the hook ids it was given.
type recorder struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.seen[req.Header.Get("x-ankusa-id")]++
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *recorder) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[id] > 0
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}
