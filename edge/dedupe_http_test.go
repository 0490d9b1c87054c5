package edge_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ankusa-go/ankusa/config"
)

func dedupeSource() config.Source {
	return config.Source{Tenant: "default", Sinks: []config.SinkSpec{{Type: "log"}},
		Dedupe: &config.DedupeSpec{Preset: "github", TTLSeconds: 3600}}
}

// Design: "the repeat gets 201 with the original id and "duplicate": true, and nothing
// new is stored"; "the first occurrence of a key wins" across partitions.
func TestDedupeAnswersTheOriginalID(t *testing.T) {
	inst := start(t, func(c *config.Config) { c.Sources["gh"] = dedupeSource() }, nil)
	first := postBody(t, inst, "/webhooks/gh", []byte(`{"n":1}`), "X-GitHub-Delivery", "d-1")
	first.expect(t, 201, "")
	again := postBody(t, inst, "/webhooks/gh", []byte(`{"n":1,"retry":true}`), "X-GitHub-Delivery", "d-1")
	again.expect(t, 201, "")
	if again.body["duplicate"] != true || again.body["id"] != first.body["id"] {
		t.Fatalf("repeat answered %s, first was %s", again.raw, first.raw)
	}
	if _, ok := first.body["duplicate"]; ok {
		t.Fatalf("first occurrence marked duplicate: %s", first.raw)
	}
	// Concurrent occurrences of a new key, spread over both partitions: one wins.
	var wg sync.WaitGroup
	replies := make(chan reply, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies <- send(inst, "/webhooks/gh", fmt.Appendf(nil, `{"race":%d}`, i), "X-GitHub-Delivery", "d-2")
		}()
	}
	wg.Wait()
	close(replies)
	distinct := map[any]bool{}
	for r := range replies {
		r.expect(t, 201, "")
		distinct[r.body["id"]] = true
	}
	if len(distinct) != 1 {
		t.Fatalf("%d different ids answered for one event key", len(distinct))
	}
	if n := len(hooks(t, inst)); n != 2 {
		t.Fatalf("%d hooks stored for two event keys", n)
	}
}

// Design: "a hook whose key would pass either is refused 503 dedupe_quota (Retry-After:
// 60), never stored without its key".
func TestDedupeQuota(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		c.Sources["gh"] = dedupeSource()
		c.Dedupe.MaxEntries, c.Dedupe.MaxEntriesPerTenant = 1, 1
	}, nil)
	first := postBody(t, inst, "/webhooks/gh", []byte(`{}`), "X-GitHub-Delivery", "q-1")
	first.expect(t, 201, "")
	r := postBody(t, inst, "/webhooks/gh", []byte(`{}`), "X-GitHub-Delivery", "q-2")
	r.expect(t, 503, "dedupe_quota")
	if r.retryAfter != "60" {
		t.Fatalf("Retry-After %q", r.retryAfter)
	}
	dup := postBody(t, inst, "/webhooks/gh", []byte(`{}`), "X-GitHub-Delivery", "q-1")
	if dup.status != 201 || dup.body["duplicate"] != true {
		t.Fatalf("a duplicate of a held key must still answer: %s", dup.raw)
	}
	postBody(t, inst, "/webhooks/sample", []byte(`{}`)).expect(t, 201, "")
	if n := len(hooks(t, inst)); n != 2 {
		t.Fatalf("%d hooks stored", n)
	}
}
