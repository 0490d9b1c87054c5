package edge

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/store"
)

// AnswerDeadLetter answers a record whose message reached no actor (sent to a batcher,
// the writer or the pen while it was being restarted) and reports whether msg was one.
// Its caller gets a 503 now, instead of at its deadline — and the restart, whose
// listener waits for the requests it serves, is not held up until then. A record the
// writer already started is left alone: its group answers it.
func AnswerDeadLetter(root *actor.RootContext, msg any) bool {
	switch m := msg.(type) {
	case *store.Pending:
		if m.Expire() {
			m.Done <- store.Result{Err: ErrBatcherStopped}
		}
	case *store.Batch:
		for _, p := range m.Records {
			if p.Expire() {
				p.Done <- store.Result{Err: store.ErrWriterStopped}
			}
		}
		m.Finish(root)
	case *penWrite:
		if m.withdraw() {
			m.done <- store.ErrWriterStopped
		}
	default:
		return false
	}
	return true
}
