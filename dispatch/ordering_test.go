package dispatch_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Design: "with ordered: true the hooks of one lane are delivered one at a time in seq
// order, a retry blocks its lane only, and the lane state lives in the store".
func TestOrderedLaneDeliversInSeqOrder(t *testing.T) {
	ordered := newSinkServer(t, func(r received, hit int) (int, http.Header, time.Duration) {
		var b struct{ N int }
		_ = json.Unmarshal(r.body, &b)
		if b.N == 3 && hit <= 2 {
			return 503, nil, 0
		}
		return 200, nil, 0
	})
	free := newSinkServer(t, nil)
	inst := start(t, map[string]config.Source{
		"ord":  httpSource("default", ordered.URL, true),
		"free": httpSource("default", free.URL, false),
	}, func(c *config.Config) {
		c.Dispatch.Retry = config.Retry{BaseMS: 400, MaxMS: 400, MaxAttempts: 10}
	})
	const n = 12
	for i := range n {
		ingest(t, inst, "/webhooks/ord", fmt.Appendf(nil, `{"n":%d}`, i))
	}
	// While hook 3 waits for its retry, the other lane is not blocked.
	poll.True(t, 5*time.Second, "the ordered lane's head to fail", func() bool {
		return counts(inst).Scheduled > 0
	})
	freeID := ingest(t, inst, "/webhooks/free", []byte(`{"free":true}`))
	poll.True(t, 2*time.Second, "the unordered lane to deliver while the ordered one waits", func() bool {
		for _, r := range free.delivered() {
			if r.id == freeID {
				return true
			}
		}
		return false
	})
	if got := len(ordered.delivered()); got >= n {
		t.Fatalf("the ordered lane finished (%d) before its blocked head's retry was due", got)
	}
	poll.True(t, 15*time.Second, "every ordered hook", func() bool { return len(ordered.delivered()) == n })
	for i, r := range ordered.delivered() {
		var b struct{ N int }
		_ = json.Unmarshal(r.body, &b)
		if b.N != i {
			t.Fatalf("delivery %d carried hook %d: the lane broke seq order", i, b.N)
		}
	}
}
