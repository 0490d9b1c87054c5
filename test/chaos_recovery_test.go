//go:build chaos

package test

import (
	"context"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
)

// TestChaosRecoveryTime measures how long ingest is unavailable after a crash of each
// edge actor (design: a crash in the edge subtree costs "ingest unavailable briefly;
// never the store"): the victim is armed, the next requests crash it, and the clock runs
// until a POST is answered 201 again.
func TestChaosRecoveryTime(t *testing.T) {
	port := freePort(t)
	inst := startInstance(t, "rec", func(c *config.Config) { c.Debug.Chaos = true; c.HTTP.Port = port }, nil)
	url := ingestURL(inst, "/webhooks/sample")
	for _, victim := range []string{edge.BatcherName("rec", 0), edge.BatcherName("rec", 1), "rec/edge/writer", "rec/edge/quarantine"} {
		inst.Kill().Arm(victim)
		start := time.Now()
		for range 4 {
			_, _, _ = post(context.Background(), url, []byte(`{}`))
		}
		for {
			if s, _, err := post(context.Background(), url, []byte(`{}`)); err == nil && s == 201 {
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("%s: ingest did not recover within 30 s", victim)
			}
			time.Sleep(time.Millisecond)
		}
		took := time.Since(start)
		t.Logf("%s crashed: ingest answered 201 again after %v", victim, took)
		if took > 2*time.Second {
			t.Errorf("%s: recovery took %v, over 2 s", victim, took)
		}
	}
}
