package supervision

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// The supervisor's internal messages. They may reach a stopped actor (a timer that fired late, a report from
// a child whose parent is gone), so none is worth a dead-letter log line.

// childStarted is sent by a child's startReporter middleware once its Receive of *actor.Started returned.
type childStarted struct {
	name   string
	gen    uint64 // the spawn it belongs to; a report from an older incarnation is stale
	nested bool   // the child is a supervisor of this package
}

// stopInOrder asks a supervisor to stop its children in reverse order, each waited for, then itself.
type stopInOrder struct{}

// startTimedOut fires StartTimeout after a spawn.
type startTimedOut struct {
	name string
	gen  uint64
}

// backoffElapsed ends an isolated child's back-off.
type backoffElapsed struct {
	name  string
	token uint64
}

func (*childStarted) IgnoreDeadLetterLogging()   {}
func (*stopInOrder) IgnoreDeadLetterLogging()    {}
func (*startTimedOut) IgnoreDeadLetterLogging()  {}
func (*backoffElapsed) IgnoreDeadLetterLogging() {}

// startPanic wraps the panic value of a child that panicked while handling *actor.Started, so its parent
// tells a failure to start from a crash of a running child even when the two notices race.
type startPanic struct {
	reason any
}

func (p *startPanic) String() string { return reasonText(p.reason) }

// startReporter is added, per spawn, to a child's props: it reports "started" to the parent once the child's
// Started handler returned, marks a panic there as a failure to start, and keeps a panic in a stop handler
// from wedging the stop (protoactor would never finish stopping that actor).
func startReporter(name string, gen uint64) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			switch env.Message.(type) {
			case *actor.Started:
				// A nested supervisor has started when its whole subtree has: it reports itself.
				sup, nested := c.Actor().(*supervisor)
				report := func() {
					c.ActorSystem().Root.Send(c.Parent(), &childStarted{name: name, gen: gen, nested: nested})
				}
				if nested {
					sup.reportStarted = report
				}
				ok := false
				defer func() {
					if !ok {
						panic(&startPanic{reason: recover()})
					}
				}()
				next(c, env)
				ok = true
				if !nested {
					report()
				}
			case *actor.Stopping, *actor.Stopped, *actor.Restarting:
				defer func() {
					if r := recover(); r != nil {
						c.Logger().Error("supervision: child panicked while stopping",
							"child", c.Self().Id, "reason", reasonText(r))
					}
				}()
				next(c, env)
			default:
				next(c, env)
			}
		}
	}
}

// reasonText renders a panic value or an error for an Event or an error message.
func reasonText(r any) string {
	switch x := r.(type) {
	case nil:
		return "<nil>"
	case error:
		return x.Error()
	case string:
		return x
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

// sendAfter delivers msg to pid after d, from outside any actor.
func sendAfter(system *actor.ActorSystem, pid *actor.PID, d time.Duration, msg any) *time.Timer {
	return time.AfterFunc(d, func() { system.Root.Send(pid, msg) })
}
