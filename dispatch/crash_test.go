package dispatch_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Design: "A panic drops the message being handled". A lane that crashes drops the
// runAttempt it was handed before the attempt starts: the scheduler must give that row
// back (due now) and free its slot, or the hook stays claimed, undelivered, until the
// next start. Every hook posted while lanes crash reaches the sink, an ordered sink in
// order, and no slot stays taken.
func TestLaneCrashLosesNoDelivery(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			srv := newSinkServer(t, nil)
			inst := start(t, map[string]config.Source{"s": httpSource("acme", srv.URL, ordered)},
				func(cfg *config.Config) { cfg.Debug.Chaos = true })
			const n = 30
			for i := range n {
				if i%3 == 1 {
					// The lane's next runAttempt crashes it: the attempt of this hook or of a retry.
					inst.Kill().ArmPrefix("disp/dispatch/scheduler/lane-")
				}
				ingest(t, inst, "/webhooks/s", fmt.Appendf(nil, `{"n":%d}`, i))
				poll.True(t, 5*time.Second, "the lane kill to fire", func() bool {
					return !inst.Kill().PrefixArmed("disp/dispatch/scheduler/lane-")
				})
			}
			poll.True(t, 10*time.Second, "every hook at the sink", func() bool { return distinct(srv) == n })
			if ordered {
				got := srv.delivered()
				for i, r := range got {
					if want := fmt.Sprintf(`{"n":%d}`, i); string(r.body) != want {
						t.Fatalf("delivery %d is %s, want %s (order broken by a lane crash)", i, r.body, want)
					}
				}
			}
			assertSlotsFree(t, inst)
		})
	}
}

// A scheduler crashed while attempts run waits for them as it stops (their outcomes are
// written) and restarts from the store: every hook is delivered and the new incarnation's
// slots and claims add up to nothing once the sink has them all.
func TestSchedulerCrashDuringAttemptsKeepsSlotsRight(t *testing.T) {
	var started atomic.Int64
	srv := newSinkServer(t, func(received, int) (int, http.Header, time.Duration) {
		started.Add(1)
		return 200, nil, 500 * time.Millisecond
	})
	inst := start(t, map[string]config.Source{"s": httpSource("acme", srv.URL, false)},
		func(cfg *config.Config) { cfg.Debug.Chaos = true })
	const n = 20
	for i := range n {
		ingest(t, inst, "/webhooks/s", fmt.Appendf(nil, `{"n":%d}`, i))
	}
	poll.True(t, 5*time.Second, "attempts in flight", func() bool { return started.Load() > 0 })
	inst.Kill().Arm("disp/dispatch/scheduler")
	ingest(t, inst, "/webhooks/s", []byte(`{"n":"after"}`)) // a commit wakes the scheduler: the kill fires
	poll.True(t, 5*time.Second, "the scheduler kill to fire", func() bool { return !inst.Kill().Armed("disp/dispatch/scheduler") })
	poll.True(t, 20*time.Second, "every hook at the sink", func() bool { return distinct(srv) == n+1 })
	assertSlotsFree(t, inst)
}

func distinct(s *sinkServer) int {
	seen := map[string]bool{}
	for _, r := range s.delivered() {
		seen[r.id] = true
	}
	return len(seen)
}

// assertSlotsFree waits for the scheduler's gauges (reported every second) to show no
// attempt running and no row claimed.
func assertSlotsFree(t *testing.T, inst *instance.Instance) {
	t.Helper()
	m := inst.Telemetry().Metrics.Dispatch
	poll.True(t, 5*time.Second, "running and claimed back to 0", func() bool {
		return testutil.ToFloat64(m.Running) == 0 && testutil.ToFloat64(m.Claimed) == 0
	})
}
