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
		sent := false
		var early func(outcome)
		if !m.route.ordered {
			// A delivered row of an unordered lane frees its slot before its outcome is written: the write joins
			// an outcome group and can take a while, the row stays claimed in the store until it lands, and a
			// crash before then only delivers it again. An ordered lane waits, so that a crash can never deliver
			// an earlier row again after a later one.
			early = func(o outcome) {
				sent = true
				root.Send(scheduler, &attemptDone{key: key, c: m.c, outcome: o})
			}
		}
		o := l.d.attempt(m.c, m.route, early)
		if !sent {
			root.Send(scheduler, &attemptDone{key: key, c: m.c, outcome: o})
		}
	})
}
