package edge

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/poll"
)

// The rate limiters' upkeep belongs to the edge's limiter actor (not to the gauges): it
// drops the keys whose buckets refilled, and stopping it stops its ticker (goleak).
func TestLimiterActorDropsRefilledKeys(t *testing.T) {
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	defer system.Shutdown()
	e := New(Settings{Instance: "limits"}, system, nil, nil, telemetry.New("limits", zerolog.Nop()), &Health{})
	lim := Limit{Rate: 1000, Burst: 1}
	// Charged a second ago at 1000/s: refilled long since, so the key can go.
	if ok, _ := e.limits.ip.Take("192.0.2.1", time.Now().Add(-time.Second), lim, 1); !ok {
		t.Fatal("a fresh bucket refused")
	}
	if n := e.limits.ip.Len(); n != 1 {
		t.Fatalf("%d keys after one take", n)
	}
	pid := system.Root.Spawn(NewLimiterProps(e))
	poll.True(t, 5*time.Second, "the refilled key dropped", func() bool { return e.limits.ip.Len() == 0 })
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}
