package edge

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// The quarantine pen holds hooks that failed verification on a source whose
// on_verify_failure is quarantine. It is bounded three times, all checked in the request's
// own goroutine so a forged flood never queues another source's hook behind it: the
// source's bucket (429 quarantine_rate_limited), the pen's bytes (503 quarantine_full,
// never evicting) and the writes waiting for the disk (503 overload). The writes are one
// group commit per pen tick.

// penTimeout bounds how long a request waits for its pen write.
const penTimeout = 5 * time.Second

// penWrite is one entry waiting for the pen's group commit.
type penWrite struct {
	entry store.QuarantineEntry
	done  chan error
}

// pen is the request-side state: reserved bytes and waiting writes.
type pen struct {
	bytes   atomic.Int64 // held plus reserved, seeded from the store at start
	waiting atomic.Int64
	seeded  atomic.Bool
}

var errPenFull = errors.New("edge: quarantine pen full")

// quarantine writes one failed hook to the pen and reports the refusal, if any.
func (e *Edge) quarantine(entry store.QuarantineEntry) *RefusedError {
	p := &e.pen
	if !p.seeded.Load() {
		return refuseStore
	}
	if p.waiting.Add(1) > int64(e.set.Quarantine.MaxPending) {
		p.waiting.Add(-1)
		return refuseOverload
	}
	defer p.waiting.Add(-1)
	size := int64(len(entry.Hook.Body))
	if max := e.set.Quarantine.MaxBytes; max > 0 && p.bytes.Add(size) > max {
		p.bytes.Add(-size)
		return refuseQuarantineFull
	} else if max <= 0 {
		p.bytes.Add(size)
	}
	w := &penWrite{entry: entry, done: make(chan error, 1)}
	e.system.Root.Send(actor.NewPID(e.system.Address(), PenName(e.set.Instance)), w)
	t := time.NewTimer(penTimeout)
	defer t.Stop()
	select {
	case err := <-w.done:
		if err != nil {
			p.bytes.Add(-size)
			if errors.Is(err, store.ErrQuarantineFull) {
				return refuseQuarantineFull
			}
			return refuseStore
		}
		return nil
	case <-t.C:
		// The write may still land; the byte count then over-reserves until the next
		// restart reseeds it, which errs on the side of refusing.
		return refuseStore
	}
}

// PenName is the full name of the pen writer actor.
func PenName(instance string) string { return instance + "/" + SubtreeName + "/" + PenChild }

// PenChild is the pen writer's name under the edge subtree.
const PenChild = "quarantine"

// penFlush is the pen writer's note to itself that its buffer forms a group.
type penFlush struct{}

// penDone reports a finished group commit of the pen.
type penDone struct{}

// penWriter group-commits quarantine entries: one synced write per tick, while the next
// tick's entries accumulate. It never blocks in Receive.
type penWriter struct {
	e        *Edge
	buf      []*penWrite
	inflight bool
	flushing bool
	tasks    *task.Group // the commit task in flight
}

// NewPenProps returns the pen writer's props.
func NewPenProps(e *Edge) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &penWriter{e: e} })
}

func (w *penWriter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		w.tasks = &task.Group{}
		// The pen's byte count survives a restart: seed the reservations from the store.
		if db := w.e.db(); db != nil {
			bytes, _ := db.QuarantineStats()
			w.e.pen.bytes.Store(bytes)
			w.e.pen.seeded.Store(true)
		}
	case *penWrite:
		w.buf = append(w.buf, m)
		if !w.flushing && !w.inflight {
			w.flushing = true
			ctx.Send(ctx.Self(), penFlush{})
		}
	case penFlush:
		w.flushing = false
		w.commit(ctx)
	case penDone:
		w.inflight = false
		w.commit(ctx)
	case *actor.Stopping, *actor.Restarting:
		for _, pw := range w.buf {
			pw.done <- ErrBatcherStopped
		}
		w.buf = nil
		// The task in flight answers its own group. Waiting for it means the store is never
		// closed under a pen write, and a restarted writer seeds its byte count from the
		// store only once that write landed or failed.
		if w.tasks != nil {
			w.tasks.Stop()
			w.tasks = nil
		}
	}
}

func (w *penWriter) commit(ctx actor.Context) {
	if w.inflight || len(w.buf) == 0 {
		return
	}
	group := w.buf
	w.buf = nil
	w.inflight = true
	self, root, e := ctx.Self(), ctx.ActorSystem().Root, w.e
	started := w.tasks.Go(func(<-chan struct{}) {
		err := store.ErrClosed
		if db := e.db(); db != nil {
			entries := make([]store.QuarantineEntry, len(group))
			for i, pw := range group {
				entries[i] = pw.entry
			}
			err = db.PutQuarantine(entries, 0) // the edge's reservations enforce max_bytes
		}
		for _, pw := range group {
			pw.done <- err
		}
		root.Send(self, penDone{})
	})
	if !started { // stopping: nothing will write the group
		for _, pw := range group {
			pw.done <- ErrBatcherStopped
		}
	}
}

// QuarantineWaiting reports the pen writes waiting for the disk (the bound is
// quarantine.max_pending).
func (e *Edge) QuarantineWaiting() int64 { return e.pen.waiting.Load() }
