package edge

import "sync"

// outage tells the handlers waiting on records that the pipeline behind them crashed.
//
// A writer or batcher that panics has its mailbox suspended until the supervisor stops
// it, and rest-for-one stops the listener first, which waits for the requests it
// serves. A record posted to the crashed actor (or queued in it) is then never
// received: without a word from the crash its handler would wait for its deadline, and
// the restart with it. So a crash fires the current outage; every handler waiting on a
// record sent while it was current expires its record (a record the writer already
// started is left to its group) and answers 503 at once. A batcher that starts renews
// a fired outage: by then every incarnation that could hold a record has stopped, and
// a record sent to one not yet respawned is a dead letter, answered by AnswerDeadLetter.
type outage struct {
	ch   chan struct{}
	once sync.Once
}

func newOutage() *outage { return &outage{ch: make(chan struct{})} }

func (o *outage) fire() { o.once.Do(func() { close(o.ch) }) }

func (o *outage) fired() bool {
	select {
	case <-o.ch:
		return true
	default:
		return false
	}
}

// PipelineCrashed is called, on its own goroutine, by a writer or batcher of this edge
// that panicked: handlers waiting on records it may hold answer them 503 now.
func (e *Edge) PipelineCrashed() { e.outage.Load().fire() }

// pipelineUp renews a fired outage; a batcher calls it when it starts.
func (e *Edge) pipelineUp() {
	for {
		o := e.outage.Load()
		if !o.fired() || e.outage.CompareAndSwap(o, newOutage()) {
			return
		}
	}
}
