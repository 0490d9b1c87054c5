package test

import (
	"context"
	"crypto/sha256"

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

	var mu sync.Mutex
	acked := make(map[[16]byte][32]byte) // id → sha256 of the body sent
	onAccepted := func(id string, body []byte) {
		raw, ok := edge.ParseID(id)
		if !ok {
			t.Errorf("201 with a malformed id %q", id)
			return
		}
		sum := sha256.Sum256(body)
		mu.Lock()
		acked[raw] = sum
		mu.Unlock()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan load.Report, 1)
	go func() {
		rep, _ := load.Run(ctx, load.Options{
			URL: n.url("/webhooks/sample"), Workers: 256, Requests: 200_000, Duration: 2 * time.Minute,
			BodyBytes: 1024, Timeout: 20 * time.Second, OnAccepted: onAccepted,
		})
		done <- rep
	}()
	// Kill in the middle of the load: once at least 2,000 hooks were acked and many
	// more are in flight on 256 connections.
	poll.Eventually(t, 90*time.Second, func() error {
		if count() < 2000 {
			return errNotYet
		}
		return nil
	})
	n.kill()
	// Let the driver see the dead server for a moment, then stop it.
	time.Sleep(200 * time.Millisecond)
	cancel()
	rep := <-done
	ackedAtKill := count()
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
