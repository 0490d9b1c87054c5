package edge

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/telemetry/task"
)

// LimiterChild is the name, under the edge subtree, of the actor that keeps the edge's
// rate limiters: the requests charge the buckets in their own goroutines, and this actor
// drops the keys whose buckets refilled, so the key tables make room as senders go quiet.
const LimiterChild = "ratelimit"

// limitSweepInterval is how often refilled limiter keys are dropped.
const limitSweepInterval = time.Second

// limitSweep asks the limiter actor for one sweep.
type limitSweep struct{}

type limiterActor struct {
	e     *Edge
	tasks *task.Group // the sweep ticker
}

// NewLimiterProps returns the props of the rate limiters' actor.
func NewLimiterProps(e *Edge) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &limiterActor{e: e} })
}

func (l *limiterActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		l.tasks = &task.Group{}
		self, root := ctx.Self(), ctx.ActorSystem().Root
		l.tasks.Every(limitSweepInterval, func() { root.Send(self, limitSweep{}) })
	case limitSweep:
		l.e.Sweep(time.Now())
	case *actor.Stopping, *actor.Restarting:
		if l.tasks != nil {
			l.tasks.Stop()
			l.tasks = nil
		}
	}
}
