package test

import (
	"context"
	"crypto/sha256"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/load"
	"github.com/ankusa-go/ankusa/test/poll"
)

// TestKill9LosesNoAckedHook proves the one rule across a crash (seed: "Never return 2xx
// until the hook is durably accepted"; "The default single-node setup survives process
// crash"): the binary takes concurrent POSTs, is killed with SIGKILL in the middle of
// them, restarts on the same data dir, and every id that was answered 201 is in the
// store with its body byte-for-byte.
func TestKill9LosesNoAckedHook(t *testing.T) {
	dataDir := t.TempDir()
	n := startNode(t, "kill", dataDir)

	sent, rep := killUnderLoad(t, n, 256)
	acked := make(map[[16]byte][32]byte, len(sent)) // id → sha256 of the body sent
	for id, sum := range sent {
		raw, ok := edge.ParseID(id)
		if !ok {
			t.Fatalf("201 with a malformed id %q", id)
		}
		acked[raw] = sum
	}
	ackedAtKill := len(acked)
	t.Logf("load at kill: %s", rep)

	// Restart on the same data dir: the node opens the store (torn tail dropped) and
	// serves again.
	n2 := startNode(t, "kill", dataDir)
	status, _, err := post(context.Background(), n2.url("/webhooks/sample"), []byte(`{"after":"restart"}`))
	if err != nil || status != 201 {
		t.Fatalf("post after restart: %d %v", status, err)
	}
	if err := n2.stop(); err != nil {
		t.Fatal(err)
	}

	db, err := store.Open(store.Options{Dir: filepath.Join(dataDir, "kill", "store")})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	defer db.Close()
	stored := make(map[[16]byte][32]byte)
	if err := db.ForEachHook(func(_ uint64, h *store.Hook) error {
		stored[h.ID] = sha256.Sum256(h.Body)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	missing, mismatched := 0, 0
	for id, sum := range acked {
		got, ok := stored[id]
		switch {
		case !ok:
			missing++
		case got != sum:
			mismatched++
		}
	}
	t.Logf("acked=%d stored=%d missing=%d body_mismatches=%d", ackedAtKill, len(stored), missing, mismatched)
	if missing != 0 || mismatched != 0 {
		t.Fatalf("%d acked hooks missing and %d with a different body after kill -9", missing, mismatched)
	}
	if ackedAtKill < 2000 {
		t.Fatalf("only %d hooks acked before the kill", ackedAtKill)
	}
}

type sentinel string

func (s sentinel) Error() string { return string(s) }

const errNotYet = sentinel("not yet")

// killUnderLoad drives n with 1 KiB hooks on workers connections, kills it with SIGKILL once at least 2,000 were
// acked (many more in flight), lets the driver see the dead server for a moment, stops it, and returns every
// acked id with the sha256 of the body it was sent with.
func killUnderLoad(t *testing.T, n *node, workers int) (map[string][32]byte, load.Report) {
	t.Helper()
	var mu sync.Mutex
	acked := make(map[string][32]byte)
	onAccepted := func(id string, body []byte) {
		sum := sha256.Sum256(body)
		mu.Lock()
		acked[id] = sum
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan load.Report, 1)
	go func() {
		rep, _ := load.Run(ctx, load.Options{
			URL: n.url("/webhooks/sample"), Workers: workers, Requests: 200_000, Duration: 2 * time.Minute,
			BodyBytes: 1024, Timeout: 20 * time.Second, OnAccepted: onAccepted,
		})
		done <- rep
	}()
	poll.Eventually(t, 90*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < 2000 {
			return errNotYet
		}
		return nil
	})
	n.kill()
	time.Sleep(200 * time.Millisecond)
	cancel()
	rep := <-done
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(acked), rep
}
