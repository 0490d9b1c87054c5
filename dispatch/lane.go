package dispatch

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/telemetry/task"
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
	w := l.d.workers.Load()
	if w == nil {
		return // no scheduler: the row stays claimed and is due again at the next start
	}
	w.run(func() { // false when stopping: the row stays claimed, as above
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

// workers run the attempts on goroutines that live as long as the scheduler's incarnation: a goroutine started
// per attempt grew its stack anew each time (measured delivering to a local HTTP sink: runtime.newstack took
// 5.5 % of the node's CPU).
type workers struct {
	jobs chan func() // unbuffered: a job is handed only to a worker waiting for one
	g    *task.Group
}

// startWorkers starts n workers in g; they return when g stops.
func startWorkers(g *task.Group, n int) *workers {
	w := &workers{jobs: make(chan func()), g: g}
	for range n {
		g.Go(func(stop <-chan struct{}) {
			for {
				select {
				case f := <-w.jobs:
					f()
				case <-stop:
					return
				}
			}
		})
	}
	return w
}

// run runs f on an idle worker, or on a goroutine of its own when none is waiting. It reports false, and runs
// nothing, once the group is stopping.
func (w *workers) run(f func()) bool {
	select {
	case w.jobs <- f:
		return true
	default:
		return w.g.Go(func(<-chan struct{}) { f() })
	}
}
