package dispatch

import (
	"github.com/asynkron/protoactor-go/actor"
)

// laneActor runs the attempts of one sink key. It holds no delivery state: the
// scheduler decides what runs and how many at once, the store holds the rows, so a
// lane can be stopped when idle and spawned again on demand.
type laneActor struct {
	d         *Dispatcher
	key       sinkKey
	scheduler *actor.PID
}

func newLaneProps(d *Dispatcher, key sinkKey, scheduler *actor.PID) *actor.Props {
	p := actor.PropsFromProducer(func() actor.Actor { return &laneActor{d: d, key: key, scheduler: scheduler} })
	if d.wrapLane != nil {
		p = d.wrapLane(p)
	}
	return p
}

func (l *laneActor) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*runAttempt)
	if !ok {
		return
	}
	// The attempt is blocking I/O: it runs in a task of the scheduler's group, whose
	// result comes back to the scheduler as a message.
	root, key, scheduler := ctx.ActorSystem().Root, l.key, l.scheduler
	tasks := l.d.tasks.Load()
	if tasks == nil {
		return // no scheduler: the row stays claimed and is due again at the next start
	}
	tasks.Go(func(<-chan struct{}) { // false when stopping: the row stays claimed, as above
		o := l.d.attempt(m.c, m.route)
		root.Send(scheduler, &attemptDone{key: key, c: m.c, outcome: o})
	})
}
