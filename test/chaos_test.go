//go:build chaos

package test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/test/load"
)

// TestChaosActorKillsLoseNoAckedHook crashes the edge's actors at random under load
// (`make chaos`): batchers and the writer are killed every second for 20 s while 64
// connections post hooks. Design: "A panic drops the message being handled: its caller
// must see a timeout or a 503, never a 2xx" — so every 201 must be in the store.
func TestChaosActorKillsLoseNoAckedHook(t *testing.T) {
	port := freePort(t)
	inst := startInstance(t, "chaos", func(c *config.Config) {
		c.HTTP.Port = port // a restarted listener must come back on the same port
		c.Batcher.RecordDeadlineMS = 2000
	}, nil)
	var mu sync.Mutex
	acked := map[[16]byte]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	victims := []string{edge.BatcherName("chaos", 0), edge.BatcherName("chaos", 1), "chaos/edge/writer"}
	var kills atomic.Int64
	go func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				inst.Kill().Arm(victims[rand.IntN(len(victims))])
				kills.Add(1)
			}
		}
	}()
	rep, err := load.Run(ctx, load.Options{URL: ingestURL(inst, "/webhooks/sample"), Workers: 64, Duration: 20 * time.Second,
		OnAccepted: func(id string, _ []byte) {
			raw, _ := edge.ParseID(id)
			mu.Lock()
			acked[raw] = true
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	stored := storedIDs(t, inst)
	missing := 0
	for id := range acked {
		if _, ok := stored[id]; !ok {
			missing++
		}
	}
	t.Logf("kills armed=%d; %s; statuses=%v; acked=%d missing=%d ack_error_ratio=%.4f", kills.Load(), rep, rep.StatusCounts, len(acked), missing,
		float64(rep.Shed+rep.Errors)/float64(max(rep.Sent, 1)))
	if missing > 0 {
		t.Fatalf("%d acked hooks missing after actor kills", missing)
	}
}
