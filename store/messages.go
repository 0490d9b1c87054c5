package store

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// PendingState is where a Pending stands with the writer.
type PendingState int32

// Pending states. Waiting → Started (the writer took it into a group) or Waiting → Expired (its caller gave up
// first); both transitions are one CAS, so exactly one side wins.
const (
	Waiting PendingState = iota
	Started
	Expired
)

// Result answers one Pending. Err == nil and !Duplicate: committed and synced, with Seq. Duplicate: a live dedupe
// key of the record's scope holds OriginalID (201 with that id, "duplicate": true); nothing was written and no
// seq given. Err != nil: nothing of the record was written; ErrDedupeQuota when its new dedupe key would pass a
// quota (503 dedupe_quota).
type Result struct {
	Seq        uint64
	Duplicate  bool
	OriginalID [16]byte
	Err        error
}

// Pending is one record waiting for its group. The edge allocates it (pooled), fills Record, sends it inside a
// Batch and waits on Done. Exactly one Result is ever sent to Done (cap 1); the writer sends none to a record
// that expired (whoever won the Expire CAS answers it).
type Pending struct {
	Record
	Done  chan Result
	state atomic.Int32
	env   actor.MessageEnvelope // carries the Pending itself; see Envelope
}

// NewPending returns a Pending with its Done channel.
func NewPending() *Pending {
	p := &Pending{Done: make(chan Result, 1)}
	p.env.Message = p
	return p
}

// Envelope is p wrapped as an actor message. An actor with receiver middleware (every supervised one) wraps each
// message it receives in a new envelope unless it already is one: sent as its own envelope, which never changes
// (it holds only p), a record costs its batcher no allocation. A Pending not made by NewPending is sent bare.
func (p *Pending) Envelope() any {
	if p.env.Message == nil {
		return p
	}
	return &p.env
}

// Expire marks p as given up by its caller (its deadline passed). true: the writer will never commit it and
// sends it no Result (the caller answers 503); false: its group already started, the caller must wait for Done
// (a started record is never abandoned).
func (p *Pending) Expire() bool {
	return p.state.CompareAndSwap(int32(Waiting), int32(Expired))
}

// State reports where p stands.
func (p *Pending) State() PendingState { return PendingState(p.state.Load()) }

// Reset makes p reusable: state back to Waiting; it drains nothing (Done must be empty) and leaves Record to the
// caller (its Value buffer can be reused). An expired Pending may be reused only after
// its batch's BatchDone, because until then the writer still holds it.
func (p *Pending) Reset() {
	p.state.Store(int32(Waiting))
}

// start is the writer's side of the CAS.
func (p *Pending) start() bool {
	return p.state.CompareAndSwap(int32(Waiting), int32(Started))
}

// Batch is sent by a partition batcher to the writer.
type Batch struct {
	Partition int
	Records   []*Pending
	ReplyTo   *actor.PID // receives BatchDone once every record of the batch has its Result (or expired)
	// Inflight, when set, is the batcher's count of its batches in flight: a finished batch takes itself off it,
	// and the BatchDone goes to ReplyTo only when the batcher waits for room (see Inflight).
	Inflight *Inflight

	// A batch made by NewBatch carries its message envelope and its BatchDone (with its own), so that the trip to
	// the writer and back costs no allocation beyond the batch itself (see Pending.Envelope).
	env, doneEnv actor.MessageEnvelope
	done         BatchDone
}

// NewBatch returns partition's batch of records, whose BatchDone goes to replyTo; inflight may be nil (a
// BatchDone for every batch).
func NewBatch(partition int, records []*Pending, replyTo *actor.PID, inflight *Inflight) *Batch {
	b := &Batch{Partition: partition, Records: records, ReplyTo: replyTo, Inflight: inflight}
	b.env.Message = b
	b.done = BatchDone{Partition: partition, Records: len(records)}
	b.doneEnv.Message = &b.done
	return b
}

// Envelope is b wrapped as an actor message (b itself when b was not made by NewBatch).
func (b *Batch) Envelope() any {
	if b.env.Message == nil {
		return b
	}
	return &b.env
}

// Done is the BatchDone of b, as a message for b.ReplyTo.
func (b *Batch) Done() any {
	if b.doneEnv.Message == nil {
		return &BatchDone{Partition: b.Partition, Records: len(b.Records)}
	}
	return &b.doneEnv
}

// BatchDone tells a batcher that every record of one of its batches was answered; the batch's Pendings may be
// reused.
type BatchDone struct{ Partition, Records int }

// Inflight counts one batcher's batches that the writer has not finished. A BatchDone message for every batch
// woke the idle batcher's mailbox on a new goroutine once a batch (at 2,000 hooks/s about 0.6 of the 6-7
// goroutines a hook made); with the count shared, a finished batch only takes itself off it, and a message goes
// to the batcher only when it waits for room (max_commits reached). The cost moved elsewhere: without those
// messages keeping its mailbox busy, an idle batcher flushes a record alone (IngestInProcess: 1.06 records a batch
// against 5.7, 4 allocations a hook against 1), which the writer merges into one group all the same; the
// process's CPU a hook did not measurably change either way.
type Inflight struct {
	n       atomic.Int32
	waiting atomic.Bool
}

// Take counts one more batch in flight if fewer than max are.
func (f *Inflight) Take(max int) bool {
	if f.n.Load() >= int32(max) {
		return false
	}
	f.n.Add(1) // only the batcher adds, so the check above holds
	return true
}

// Wait tells the writer that the batcher waits for room, and reports false when room appeared meanwhile (the
// batcher then tries again itself; a BatchDone may still come, which is harmless). Sequentially consistent
// atomics on both sides: either the batcher's load here sees the writer's decrement, or the writer's swap in
// Finish sees waiting set, so a batcher never waits for a BatchDone that no one sends.
func (f *Inflight) Wait(max int) bool {
	f.waiting.Store(true)
	if f.n.Load() < int32(max) {
		f.waiting.Store(false)
		return false
	}
	return true
}

// InFlight is how many batches are in flight.
func (f *Inflight) InFlight() int { return int(f.n.Load()) }

// Finish reports b finished: every record answered (or expired). It takes b off its batcher's count and sends
// the BatchDone to ReplyTo if the batcher waits for room, or always when b counts on no Inflight.
func (b *Batch) Finish(root *actor.RootContext) {
	if f := b.Inflight; f != nil {
		f.n.Add(-1)
		if !f.waiting.CompareAndSwap(true, false) {
			return
		}
	}
	if b.ReplyTo != nil {
		root.Send(b.ReplyTo, b.Done())
	}
}
