package edge

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/store"
)

// flush is the batcher's note to itself that the records now in its buffer form a batch.
// Records that arrive before it is handled join the same batch, so a burst becomes one
// batch without any linger.
type flush struct{}

// batcher is one partition's group-commit batcher. It never blocks in Receive: it
// buffers records and hands batches to the writer while fewer than maxCommits of its
// batches are in flight.
type batcher struct {
	e          *Edge
	partition  int
	maxBatch   int
	maxCommits int
	maxDelay   time.Duration
	writer     *actor.PID

	buf       []*store.Pending
	inflight  *store.Inflight // this incarnation's batches in the writer; a restart starts at none
	scheduled bool
	timer     *time.Timer // the max_delay wake-up, made once and re-armed; stopped with the batcher
	// flushEnv is flush as an actor message, made once: the batcher's receiver middleware would wrap a bare one
	// in a new envelope every time (see store.Pending.Envelope).
	flushEnv *actor.MessageEnvelope
}

// NewBatcherProps returns the props of partition i's batcher.
func NewBatcherProps(e *Edge, i int, writer *actor.PID) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &batcher{e: e, partition: i, maxBatch: e.set.MaxBatch, maxCommits: e.set.MaxCommits,
			maxDelay: e.set.MaxDelay, writer: writer, flushEnv: &actor.MessageEnvelope{Message: flush{}},
			inflight: new(store.Inflight)}
	}, actor.WithReceiverMiddleware(answerOnPanic(e)))
}

// answerOnPanic answers the record whose handling panicked (the panic drops the message)
// with ErrBatcherStopped and fires the edge's outage, whatever the message, then lets
// the panic go on to the supervisor: the crashed batcher's mailbox is suspended until it
// is stopped, so the records in it and in its buffer are answered 503 now by their
// handlers instead of at their deadline, and the restart behind the batcher (the
// listener waits for the requests it serves) is not held up by them.
func answerOnPanic(e *Edge) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				if r := recover(); r != nil {
					if p, ok := env.Message.(*store.Pending); ok && p.Expire() {
						p.Done <- store.Result{Err: ErrBatcherStopped}
					}
					e.PipelineCrashed()
					panic(r)
				}
			}()
			next(c, env)
		}
	}
}

func (b *batcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		b.e.pipelineUp()
	case *store.Pending:
		b.buf = append(b.buf, m)
		switch {
		case len(b.buf) >= b.maxBatch:
			b.dispatch(ctx)
		case !b.scheduled:
			b.scheduled = true
			if b.maxDelay > 0 {
				b.armTimer(ctx)
			} else {
				ctx.Send(ctx.Self(), b.flushEnv)
			}
		}
	case flush:
		b.scheduled = false
		b.dispatch(ctx)
	case *store.BatchDone:
		// Sent only while the batcher waited for room (or by a batch of an earlier incarnation): look again.
		b.dispatch(ctx)
	case *actor.Restarting, *actor.Stopping:
		if b.timer != nil {
			b.timer.Stop()
		}
		b.dropAll()
	}
}

// armTimer sends flush to the batcher after max_delay. A flush that finds the buffer
// already sent is harmless: it dispatches nothing.
func (b *batcher) armTimer(ctx actor.Context) {
	if b.timer == nil {
		self, root, env := ctx.Self(), ctx.ActorSystem().Root, b.flushEnv
		b.timer = time.AfterFunc(b.maxDelay, func() { root.Send(self, env) })
		return
	}
	b.timer.Reset(b.maxDelay)
}

// dispatch hands full-or-ready batches to the writer while the partition has room in
// flight; the rest waits for a BatchDone, which the writer sends once room appears.
func (b *batcher) dispatch(ctx actor.Context) {
	for len(b.buf) > 0 {
		if !b.inflight.Take(b.maxCommits) {
			if b.inflight.Wait(b.maxCommits) {
				return
			}
			continue
		}
		n := min(len(b.buf), b.maxBatch)
		recs := make([]*store.Pending, n)
		copy(recs, b.buf)
		b.buf = append(b.buf[:0], b.buf[n:]...)
		ctx.Send(b.writer, store.NewBatch(b.partition, recs, ctx.Self(), b.inflight).Envelope())
	}
}

// dropAll answers every buffered record with ErrBatcherStopped: a batcher that stops or
// crashes never leaves a caller waiting, and never answers 2xx for what it dropped.
func (b *batcher) dropAll() {
	for _, p := range b.buf {
		if p.Expire() {
			p.Done <- store.Result{Err: ErrBatcherStopped}
		}
	}
	clear(b.buf)
	b.buf = b.buf[:0]
}
