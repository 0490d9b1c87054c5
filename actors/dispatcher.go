package actors

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Throughput is how many messages a mailbox run handles before it yields its goroutine: protoactor's default.
const Throughput = 300

// Dispatcher runs actors' mailboxes on goroutines kept between runs. protoactor's default dispatcher starts a new
// goroutine for every mailbox run; on the ingest path (a batcher run for every few hooks, a writer run for every
// group) each new goroutine starts on a small stack and grows it, copying it, on the way into the actor's
// Receive: 3-4 % of the node's CPU in a loopback ingest profile. A kept goroutine has grown its stack once.
//
// A run is handed to an idle goroutine when one is parked, else to a new one, so a run never waits for another
// (an actor may block in Receive). After a run a goroutine parks for the next unless maxIdle are parked already.
// Close releases the parked ones; a run scheduled after Close gets a goroutine of its own that ends with it.
type Dispatcher struct {
	work    chan func()
	stop    chan struct{}
	once    sync.Once
	closed  atomic.Bool
	idle    atomic.Int32
	maxIdle int32
	// started counts the goroutines ever started, live those not ended yet (tests read both).
	started atomic.Int64
	live    atomic.Int32
}

var _ actor.Dispatcher = (*Dispatcher)(nil)

// NewDispatcher returns a dispatcher that keeps at most maxIdle goroutines parked between runs (at least 1).
func NewDispatcher(maxIdle int) *Dispatcher {
	return &Dispatcher{work: make(chan func()), stop: make(chan struct{}), maxIdle: int32(max(maxIdle, 1))}
}

// Schedule runs fn (a mailbox run) on a parked goroutine, or on a new one when none is parked.
func (d *Dispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		d.started.Add(1)
		d.live.Add(1)
		go d.run(fn)
	}
}

// Throughput is the messages a mailbox run handles before it yields.
func (d *Dispatcher) Throughput() int { return Throughput }

// Close ends the parked goroutines and those that finish their run from now on. It is idempotent.
func (d *Dispatcher) Close() {
	d.once.Do(func() {
		d.closed.Store(true)
		close(d.stop)
	})
}

// run runs fn, then the runs handed to it while it is parked, until it is not needed.
func (d *Dispatcher) run(fn func()) {
	defer d.live.Add(-1)
	for {
		fn()
		fn = nil // not kept reachable by a parked goroutine
		if d.closed.Load() {
			return
		}
		// Counted before it parks, so at most maxIdle are ever parked however many finish at once.
		if d.idle.Add(1) > d.maxIdle {
			d.idle.Add(-1)
			return
		}
		select {
		case fn = <-d.work:
			d.idle.Add(-1)
		case <-d.stop:
			d.idle.Add(-1)
			return
		}
	}
}
