package test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/test/load"
	"github.com/ankusa-go/ankusa/test/poll"
)

// deliveryLog is an HTTP sink destination that records what it was given.
type deliveryLog struct {
	mu    sync.Mutex
	count map[string]int
	sums  map[string][32]byte
}

func (d *deliveryLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(500)
		return
	}
	id := r.Header.Get("x-ankusa-id")
	d.mu.Lock()
	d.count[id]++
	d.sums[id] = sha256.Sum256(body)
	d.mu.Unlock()
	w.WriteHeader(204)
}

func (d *deliveryLog) snapshot() (distinct, total int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.count {
		distinct++
		total += c
	}
	return distinct, total
}

// TestEveryAckedHookDeliveredAfterKill9 proves at-least-once delivery across a crash
// (design: "At-least-once to every sink"; "a row it had already claimed is put back as
// due at the next start"): the binary ingests under load while it delivers to an HTTP
// sink, is killed with SIGKILL in the middle of both, restarts on the same data dir, and
// every id that got a 201 reaches the sink with its body byte-for-byte.
func TestEveryAckedHookDeliveredAfterKill9(t *testing.T) {
	dest := &deliveryLog{count: map[string]int{}, sums: map[string][32]byte{}}
	srv := httptest.NewServer(dest)
	defer srv.Close()
	sources := fmt.Sprintf("sources:\n  sample:\n    sinks:\n      - type: http\n        url: %s\n", srv.URL)
	dataDir := t.TempDir()
	n := startNodeWith(t, "deliver", dataDir, sources)

	var mu sync.Mutex
	acked := map[string][32]byte{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan load.Report, 1)
	go func() {
		rep, _ := load.Run(ctx, load.Options{
			URL: n.url("/webhooks/sample"), Workers: 128, Requests: 200_000, Duration: 2 * time.Minute, BodyBytes: 1024,
			OnAccepted: func(id string, body []byte) {
				sum := sha256.Sum256(body)
				mu.Lock()
				acked[id] = sum
				mu.Unlock()
			},
		})
		done <- rep
	}()
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	// Kill once hooks are being acked and delivered at the same time.
	poll.Eventually(t, 90*time.Second, func() error {
		if delivered, _ := dest.snapshot(); ackedCount() < 3000 || delivered < 500 {
			return errNotYet
		}
		return nil
	})
	n.kill()
	time.Sleep(200 * time.Millisecond)
	cancel()
	rep := <-done
	atKill, _ := dest.snapshot()
	t.Logf("load at kill: %s; delivered before the kill: %d", rep, atKill)

	n2 := startNodeWith(t, "deliver", dataDir, sources)
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	poll.Eventually(t, 120*time.Second, func() error {
		dest.mu.Lock()
		defer dest.mu.Unlock()
		missing := 0
		for id := range acked {
			if dest.count[id] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acked hooks not delivered yet", missing, want)
		}
		return nil
	})
	if err := n2.stop(); err != nil {
		t.Fatal(err)
	}
	dest.mu.Lock()
	defer dest.mu.Unlock()
	duplicates, mismatched := 0, 0
	for id, sum := range acked {
		if dest.count[id] > 1 {
			duplicates += dest.count[id] - 1
		}
		if dest.sums[id] != sum {
			mismatched++
		}
	}
	distinct, total := len(dest.count), 0
	for _, c := range dest.count {
		total += c
	}
	t.Logf("acked=%d delivered=%d (distinct ids %d, deliveries %d) duplicates_of_acked=%d body_mismatches=%d",
		want, want, distinct, total, duplicates, mismatched)
	if mismatched > 0 {
		t.Fatalf("%d acked hooks delivered with a different body", mismatched)
	}
}
