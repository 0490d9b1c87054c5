package instance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/storage"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Design §3: the storage subtree is an isolated domain ("a crash costs: obligations pile up"). The chaos drill's
// kill injection crashes <instance>/storage/compactor; ingest keeps answering 201, the compactor comes back and
// every hook posted before and after the crash ends up archived and fetchable by id, byte for byte.
func TestCompactorCrashLosesNothingAndIngestGoesOn(t *testing.T) {
	inst := fixture.Instance(t, "arc", func(cfg *config.Config) {
		cfg.Node.Roles = []string{config.RoleEdge, config.RoleStorage}
		cfg.Admin.Enabled = false
		cfg.Debug.Chaos = true
		cfg.Storage.RollMS, cfg.Storage.IntervalMS = 1, 20
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
	}, nil)
	sent := map[[16]byte][]byte{}
	post := func(i int) {
		t.Helper()
		body := fmt.Appendf(nil, "{\"n\":%d}\x00\xfe", i)
		resp, err := http.Post("http://"+inst.IngestAddr()+"/webhooks/sample", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var a struct{ ID string }
		_ = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		id, ok := edge.ParseID(a.ID)
		if resp.StatusCode != 201 || !ok {
			t.Fatalf("POST %d answered %d %q", i, resp.StatusCode, a.ID)
		}
		sent[id] = body
	}
	for i := range 10 {
		post(i)
	}
	victim := "arc/" + storage.SubtreeName + "/" + storage.CompactorName
	inst.Kill().Arm(victim)
	poll.True(t, 10*time.Second, "the compactor killed", func() bool { return !inst.Kill().Armed(victim) })
	for i := 10; i < 20; i++ {
		post(i)
	}
	poll.Eventually(t, 15*time.Second, func() error {
		if n := inst.Store().Counts().ArchivePending; n != 0 {
			return fmt.Errorf("%d obligations pending", n)
		}
		for id, want := range sent {
			h, err := storage.Fetch(context.Background(), inst.Store(), inst.Blob(), id)
			if err != nil {
				return err
			}
			if !bytes.Equal(h.Body, want) {
				return fmt.Errorf("hook %x: body %q, want %q", id, h.Body, want)
			}
		}
		return nil
	})
}

// Kill injection is a chaos-drill switch: without debug.chaos no actor carries it, so an armed name never fires
// and ingest goes on untouched.
func TestKillInjectionIsOffWithoutDebugChaos(t *testing.T) {
	inst := fixture.Instance(t, "nochaos", func(cfg *config.Config) {
		cfg.Node.Roles = []string{config.RoleEdge}
		cfg.Admin.Enabled = false
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
	}, nil)
	victim := "nochaos/edge/writer"
	inst.Kill().Arm(victim)
	for i := range 5 {
		resp, err := http.Post("http://"+inst.IngestAddr()+"/webhooks/sample", "application/json", bytes.NewReader(fmt.Appendf(nil, `{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("POST %d answered %d", i, resp.StatusCode)
		}
	}
	if !inst.Kill().Armed(victim) {
		t.Fatal("the writer was crashed although debug.chaos is off")
	}
}
