package edge

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// The quarantine pen holds hooks that failed verification on a source whose
// on_verify_failure is quarantine. It is bounded four times, all checked in the request's
// own goroutine so a forged flood never queues another source's hook behind it: the
// source's bucket (429 quarantine_rate_limited), the pen's bytes on the node, of the
// source and of the source's tenant (503 quarantine_full, never evicting; the shares are
// quarantine.source_share and tenant_share of max_bytes) and the writes waiting for the
// disk (503 overload). The writes are one group commit per pen tick; the sweeper deletes
// what nobody released after quarantine.retention_seconds.
//
// The bytes are what an entry stores (body, kept headers, request line: a flood of
// empty bodies with large heads fills the budget too). The bytes a request checks are the store's (exact: they follow every put, release,
// purge and sweep, and survive a restart) plus the writes in flight, reserved here until
// their group returns. A write answered 503 never lands: it is withdrawn before its group
// starts, and a write whose group started is waited out, as the ingest writer does.

// penWrite is one entry waiting for the pen's group commit.
type penWrite struct {
	entry store.QuarantineEntry
	done  chan error
	state atomic.Int32 // penQueued → penStarted (the writer took it) or penWithdrawn (its caller gave up)
}

const (
	penQueued int32 = iota
	penStarted
	penWithdrawn
)

// start marks w as taken into a group; false when its caller withdrew it.
func (w *penWrite) start() bool { return w.state.CompareAndSwap(penQueued, penStarted) }

// withdraw gives w up; false when its group already started (it may land: wait it out).
func (w *penWrite) withdraw() bool { return w.state.CompareAndSwap(penQueued, penWithdrawn) }

// pen is the request-side state: the bytes of the writes in flight and how many wait.
type pen struct {
	mu sync.Mutex
	// inflight are the bytes of the writes queued or being written, on the node and
	// by source and tenant (entries removed at zero, so the maps hold only what is in
	// flight: at most quarantine.max_pending of each).
	inflight       int64
	source, tenant map[string]int64
	waiting        atomic.Int64
}

// Scopes of a full pen, the label of ankusa_quota_refused_total.
const (
	quotaPenNode   = "quarantine_node"
	quotaPenSource = "quarantine_source"
	quotaPenTenant = "quarantine_tenant"
)

// reserve checks that entry fits the pen's node, source and tenant budgets with what is
// held and in flight, and reserves its bytes; it returns the scope that is full, if any.
func (e *Edge) reserve(db *store.DB, source, tenant string, size int64) (full string) {
	q := e.set.Quarantine
	held, bySource, byTenant := db.QuarantineUsage(source, tenant)
	p := &e.pen
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case held+p.inflight+size > q.MaxBytes:
		return quotaPenNode
	case bySource+p.source[source]+size > share(q.MaxBytes, q.SourceShare):
		return quotaPenSource
	case byTenant+p.tenant[tenant]+size > share(q.MaxBytes, q.TenantShare):
		return quotaPenTenant
	}
	if p.source == nil {
		p.source, p.tenant = map[string]int64{}, map[string]int64{}
	}
	p.inflight += size
	p.source[source] += size
	p.tenant[tenant] += size
	return ""
}

// unreserve drops a reservation once its write returned (the store then counts it, if it
// landed) or was withdrawn.
func (e *Edge) unreserve(source, tenant string, size int64) {
	p := &e.pen
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight -= size
	for _, m := range [...]struct {
		m   map[string]int64
		key string
	}{{p.source, source}, {p.tenant, tenant}} {
		if n := m.m[m.key] - size; n > 0 {
			m.m[m.key] = n
		} else {
			delete(m.m, m.key)
		}
	}
}

// share is a fraction of limit, at least one byte.
func share(limit int64, frac float64) int64 {
	return max(1, int64(float64(limit)*frac))
}

// quarantine writes one failed hook to the pen and reports the refusal, if any. Its
// caller took a token of the source's pen bucket; a write the store could not make (or
// that was withdrawn before it started) gives it back, as the design has it: a store that
// cannot write "is a 503 that spends no token". A full pen or too many waiting writes
// keep the token, so a flood against a full pen is still paced by the bucket.
func (e *Edge) quarantine(entry store.QuarantineEntry) *RefusedError {
	r := e.penWrite(entry)
	if r == refuseStore {
		e.limits.penBuckets.Refund(entry.Hook.Source, e.limits.quarantine, 1)
	}
	return r
}

func (e *Edge) penWrite(entry store.QuarantineEntry) *RefusedError {
	db := e.db()
	if db == nil {
		return refuseStore
	}
	p := &e.pen
	if p.waiting.Add(1) > int64(e.set.Quarantine.MaxPending) {
		p.waiting.Add(-1)
		return refuseOverload
	}
	defer p.waiting.Add(-1)
	source, tenant, size := entry.Hook.Source, entry.Hook.Tenant, int64(store.QuarantineEntrySize(&entry))
	if full := e.reserve(db, source, tenant, size); full != "" {
		e.tel.QuotaRefused(source, full)
		return refuseQuarantineFull
	}
	defer e.unreserve(source, tenant, size)
	w := &penWrite{entry: entry, done: make(chan error, 1)}
	e.system.Root.Send(actor.NewPID(e.system.Address(), PenName(e.set.Instance)), w)
	t := time.NewTimer(e.penTimeout())
	defer t.Stop()
	var err error
	select {
	case err = <-w.done:
	case <-t.C:
		if w.withdraw() {
			return refuseStore // never started, so it never lands
		}
		err = <-w.done // started: it may land, so its outcome is the answer
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrQuarantineFull):
		return refuseQuarantineFull
	default:
		return refuseStore
	}
}

// penTimeout is quarantine.write_timeout_ms: how long a write may wait to start.
func (e *Edge) penTimeout() time.Duration {
	if ms := e.set.Quarantine.WriteTimeoutMS; ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return 5 * time.Second
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
			if pw.withdraw() {
				pw.done <- ErrBatcherStopped
			}
		}
		w.buf = nil
		// The task in flight answers its own group. Waiting for it means the store is never
		// closed under a pen write, and no answer of the group is left undecided.
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
	// A write its caller withdrew (answered 503 already) is dropped here, before the
	// group starts: an answer and the pen never disagree.
	var group []*penWrite
	for _, pw := range w.buf {
		if pw.start() {
			group = append(group, pw)
		}
	}
	w.buf = nil
	if len(group) == 0 {
		return
	}
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
