package supervision

import (
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Domain names the failure domain of a child, e.g. "core", "metrics", "dispatch", "storage", "admin".
type Domain string

// ChildSpec describes one supervised child.
type ChildSpec struct {
	Name     string       // stable name under the parent; the spawned PID id is "<parent id>/<Name>"
	Props    *actor.Props // the child's props; may itself be a supervisor built with NewProps (nesting)
	Domain   Domain
	Isolated bool // an isolated domain's crash never touches its siblings
}

// Event kinds emitted through Options.OnEvent.
const (
	EventSubtreeDown    = "subtree_down"    // an isolated child exhausted its budget and waits Delay
	EventSubtreeUp      = "subtree_up"      // that child reported started again after its back-off
	EventChildRestarted = "child_restarted" // a crashed child reported started again
	EventEscalated      = "escalated"       // the core budget is exhausted; the supervisor gives up
)

// Event is what a supervisor reports about its children.
type Event struct {
	Kind   string // "subtree_down" | "subtree_up" | "child_restarted" | "escalated"
	Domain Domain
	Child  string
	Reason string        // the panic value / error text (never message contents)
	Delay  time.Duration // for subtree_down: back-off before the retry
}

// Options tune a supervisor. Zero fields take the defaults below.
type Options struct {
	MaxRestarts  int           // core restart budget within Window (default 3, negative: none); isolated children get the same, each its own
	Window       time.Duration // default 10s
	BackoffMin   time.Duration // isolated domain back-off start (default 1s)
	BackoffMax   time.Duration // cap (default 60s); doubling, jittered, reset after BackoffReset up
	BackoffReset time.Duration // up this long, an isolated child's back-off starts again from BackoffMin (default 1m)
	// OnEvent is called on the supervisor's goroutine: it must not block (hand the event to a channel or a
	// logger). May be nil.
	OnEvent      func(Event)
	StartTimeout time.Duration  // default 30s: a child that has not reported started by then has failed to start
	Rand         func() float64 // jitter source in [0,1) (tests make it deterministic); default math/rand/v2
	// Dispatcher, when set, runs the mailboxes of the children this supervisor spawns (actors.Dispatcher keeps
	// their goroutines between runs); nil leaves each child's own.
	Dispatcher actor.Dispatcher
}

func (o Options) withDefaults() Options {
	switch {
	case o.MaxRestarts == 0:
		o.MaxRestarts = 3
	case o.MaxRestarts < 0:
		o.MaxRestarts = 0
	}
	if o.Window <= 0 {
		o.Window = 10 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 60 * time.Second
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = o.BackoffMin
	}
	if o.BackoffReset <= 0 {
		o.BackoffReset = time.Minute
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	return o
}

// backoff is the delay before the attempt-th (from 0) respawn of an isolated child: min doubled attempt times,
// capped at max, then jittered down into [d/2, d] by r in [0,1) so that domains that failed together do not
// come back together.
func backoff(attempt int, min, max time.Duration, r float64) time.Duration {
	d := min
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	if r < 0 {
		r = 0
	} else if r > 1 {
		r = 1
	}
	half := d / 2
	return half + time.Duration(r*float64(d-half))
}
