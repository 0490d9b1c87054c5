package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/telemetry/task"
)

// Committer is what the writer commits through; *DB implements it, tests wrap it to count or fail commits.
// A call that returns no error sets every record's Outcome (see DB.CommitHooks); the writer answers each
// record from it and ignores the returned seq.
type Committer interface {
	CommitHooks(recs []*Record) (uint64, error)
}

// ConfirmingCommitter is a Committer whose commit has a second half (wal.type dual: the intake log's confirm).
// CommitHooksConfirm returns once the local synced write returned; confirm, when not nil, then waits for the
// second half and returns the error every committed record is to be answered with instead (nil: both halves
// hold). A non-nil err answers the whole group, as CommitHooks' does.
type ConfirmingCommitter interface {
	Committer
	CommitHooksConfirm(recs []*Record) (confirm func() error, err error)
}

// WriterOptions configures the writer actor.
type WriterOptions struct {
	GroupMaxBytes   int64            // batcher.group_commit_max_bytes: sum of Value sizes in one group (<= 0: no bound)
	GroupMaxRecords int              // batcher.group_commit_max_records (<= 0: no bound)
	OnCommit        func(CommitInfo) // may be nil; called from the commit task after each group
	// OnPanic may be nil; it is called on the writer's goroutine when handling a message panicked, before
	// the panic goes on to the supervisor. The mailbox stays suspended until the writer is stopped, so
	// batches still in it are answered only by their callers (the edge expires them).
	OnPanic func()
	Log     zerolog.Logger
	// MailboxMiddleware is added to the writer's mailbox (the props set their own mailbox, so mailbox metrics
	// go here rather than through Props.Configure, which would replace it).
	MailboxMiddleware []actor.MailboxMiddleware
}

// CommitInfo describes one group commit, reported to WriterOptions.OnCommit before its callers are answered.
type CommitInfo struct {
	Duration       time.Duration
	Records, Bytes int
	Err            error
}

// NewWriterProps returns the props of the writer actor: it merges every Batch queued from every partition into
// one group, commits it with one synced CommitHooks in a commit task while the next group accumulates, and
// answers each record from that task, which then takes the next group from the queue itself.
//
// Invariants:
//  1. At most one group of an incarnation is in its local write; Receive never blocks on it (only Stopping
//     waits for it, so a stop never leaves a synced write running behind it). Under a ConfirmingCommitter the
//     groups whose local write returned may still await their confirm, each in its own task, answered by it.
//  2. A record joins a group only by winning the CAS Waiting→Started; an expired record is never committed and
//     gets no seq. A started record is always answered, by the task that commits it, even if the writer stops
//     or restarts meanwhile.
//  3. A record queued but not started when the writer stops or restarts is answered ErrWriterStopped.
//  4. Every Batch gets exactly one BatchDone, after each of its records was answered (or had expired).
//
// A Stop is a system message and overtakes batches still in the mailbox; protoactor then drops them unseen, so
// a mailbox middleware answers those too (ErrWriterStopped). A batch sent after the writer is gone is a dead
// letter, answered by whoever subscribes to them. After a panic the batches the writer queued are answered
// ErrWriterStopped and its task starts no further group; the mailbox is suspended until the stop, so the
// batches still in it are answered by their callers, told through WriterOptions.OnPanic; the stop cannot come
// first, because what is stopped before the writer waits for those callers. The props are for one
// writer: spawn them once.
func NewWriterProps(db Committer, opts WriterOptions) *actor.Props {
	// shared outlives restarts: a restarted writer needs nothing from its predecessor, but Stop must still wait
	// for a task its predecessor started.
	shared := &writerShared{log: opts.Log}
	mw := append([]actor.MailboxMiddleware{stopDrain{shared}}, opts.MailboxMiddleware...)
	return actor.PropsFromProducer(func() actor.Actor {
		return &writer{db: db, opts: opts, shared: shared, g: &group{}}
	}, actor.WithMailbox(actor.Unbounded(mw...)), actor.WithReceiverMiddleware(answerBatchOnPanic(opts.OnPanic)))
}

// answerBatchOnPanic answers the records of a batch whose handling panicked (the panic
// drops the message) with ErrWriterStopped, ends the incarnation (its queued records are
// answered ErrWriterStopped and its commit task starts no further group: a writer that
// panicked commits nothing more), calls onPanic (whatever the message), then lets the
// panic go on to the supervisor. Without it their callers would wait for their deadline,
// and every restart behind the writer would wait with them.
func answerBatchOnPanic(onPanic func()) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				if r := recover(); r != nil {
					if b, ok := env.Message.(*Batch); ok {
						for _, p := range b.Records {
							if p.start() {
								select {
								case p.Done <- Result{Err: ErrWriterStopped}:
								default:
								}
							}
						}
						b.Finish(c.ActorSystem().Root)
					}
					if w, ok := c.Actor().(*writer); ok {
						w.halt(c.ActorSystem().Root)
					}
					if onPanic != nil {
						onPanic()
					}
					panic(r)
				}
			}()
			next(c, env)
		}
	}
}

type writerShared struct {
	tasks   task.Group // commit and confirm tasks of every incarnation; never stopped, only waited for
	root    atomic.Pointer[actor.RootContext]
	stopped atomic.Bool
	log     zerolog.Logger
}

// stopDrain sees every message the mailbox hands over, including those a stopped actor drops, and answers the
// dropped batches.
type stopDrain struct{ shared *writerShared }

func (stopDrain) MailboxStarted()   {}
func (stopDrain) MessagePosted(any) {}
func (stopDrain) MailboxEmpty()     {}
func (d stopDrain) MessageReceived(m any) {
	if !d.shared.stopped.Load() {
		return
	}
	if b, ok := actor.UnwrapEnvelopeMessage(m).(*Batch); ok {
		if root := d.shared.root.Load(); root != nil {
			failBatch(root, d.shared.log, b)
		}
	}
}

type writer struct {
	db     Committer
	opts   WriterOptions
	shared *writerShared

	// mu guards the fields below, which Receive and this incarnation's commit task share: the task takes the
	// next group from the queue itself when its commit returns, so consecutive commits follow each other
	// without a round trip through the mailbox (two goroutine hand-offs, on a loaded box each as long as a
	// synced write, during which the disk idles and every queued caller waits). Neither side holds mu across
	// anything slower than moving batches between slices.
	mu      sync.Mutex
	queue   []*Batch // arrived, not yet in a group
	running bool     // the commit task is running; it owns g
	stopped bool     // this incarnation stopped or is restarting: its task ends after the group it holds
	g       *group
}

// group is one commit: the started records (parallel to recs) and the batches they came from.
type group struct {
	pendings []*Pending
	recs     []*Record
	batches  []*Batch
	bytes    int
}

func (g *group) reset() {
	clear(g.pendings)
	clear(g.recs)
	clear(g.batches)
	g.pendings, g.recs, g.batches, g.bytes = g.pendings[:0], g.recs[:0], g.batches[:0], 0
}

func (w *writer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		w.shared.root.Store(ctx.ActorSystem().Root)
		// shared outlives the incarnation: a writer spawned again under the same props after
		// a stop must not find its predecessor's stop still set, or its mailbox would fail
		// every batch it is handed.
		w.shared.stopped.Store(false)
	case *Batch:
		w.enqueue(ctx.ActorSystem().Root, m)
	case *actor.Restarting:
		w.halt(ctx.ActorSystem().Root)
	case *actor.Stopping:
		w.shared.stopped.Store(true)
		w.halt(ctx.ActorSystem().Root)
		// The task answers its callers without the writer; waiting here only makes Stop return after the
		// last synced write, so whoever closes the store next does not close it under a commit.
		w.shared.tasks.Wait()
	}
}

// enqueue queues b and, when no commit task is running, starts one with the next group.
func (w *writer) enqueue(root *actor.RootContext, b *Batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		failBatch(root, w.opts.Log, b) // nothing would ever take it from the queue
		return
	}
	w.queue = append(w.queue, b)
	if w.running {
		return
	}
	if !w.nextGroupLocked(root) {
		return
	}
	w.running = true
	w.shared.tasks.Go(func(<-chan struct{}) { w.run(root) })
}

// halt ends the incarnation: every queued, unstarted record is answered ErrWriterStopped, and the task ends
// once the group it holds is answered.
func (w *writer) halt(root *actor.RootContext) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.failQueuedLocked(root)
}

// nextGroupLocked fills w.g from the queue (under mu) and reports whether it holds a record to commit. Batches
// whose records all expired are answered at once and the next ones tried.
func (w *writer) nextGroupLocked(root *actor.RootContext) bool {
	g := w.g
	for len(w.queue) > 0 {
		w.fill(g)
		if len(g.pendings) > 0 {
			return true
		}
		for _, b := range g.batches {
			b.Finish(root)
		}
		g.reset()
	}
	return false
}

// run is the commit task: it commits w.g, then the next group the queue holds, until the queue is empty or the
// incarnation stopped.
func (w *writer) run(root *actor.RootContext) {
	for {
		if w.commit(root, w.g) {
			w.g = &group{} // the group's confirm task still answers from the old one
		} else {
			w.g.reset()
		}
		w.mu.Lock()
		if w.stopped || !w.nextGroupLocked(root) {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}

// fill moves whole batches from the queue into g, within the group bounds (the first batch always goes, so a
// batch larger than the bounds still commits), starting every record that has not expired.
func (w *writer) fill(g *group) {
	taken := 0
	for _, b := range w.queue {
		if len(g.batches) > 0 && !w.fits(g, b) {
			break
		}
		for _, p := range b.Records {
			if p.start() {
				g.pendings = append(g.pendings, p)
				g.recs = append(g.recs, &p.Record)
				g.bytes += len(p.Value)
			}
		}
		g.batches = append(g.batches, b)
		taken++
	}
	// Shift the rest down rather than reslice, so the backing array is reused instead of creeping forward.
	n := copy(w.queue, w.queue[taken:])
	clear(w.queue[n:])
	w.queue = w.queue[:n]
}

// fits tells whether b's live records still fit in g.
func (w *writer) fits(g *group, b *Batch) bool {
	n, bytes := 0, 0
	for _, p := range b.Records {
		if p.State() == Waiting {
			n++
			bytes += len(p.Value)
		}
	}
	if w.opts.GroupMaxRecords > 0 && len(g.pendings)+n > w.opts.GroupMaxRecords {
		return false
	}
	if w.opts.GroupMaxBytes > 0 && int64(g.bytes+bytes) > w.opts.GroupMaxBytes {
		return false
	}
	return true
}

// commit is one group's commit: one synced CommitHooks for g, then every record's Result and every batch's
// BatchDone. It reports whether g was handed to a confirm task (which then answers it) instead.
func (w *writer) commit(root *actor.RootContext, g *group) (detached bool) {
	start := time.Now()
	if cc, ok := w.db.(ConfirmingCommitter); ok {
		return w.commitConfirm(root, g, cc, start)
	}
	_, err := commitRecovered(w.db, g.recs)
	w.answerGroup(root, g, err, start)
	return false
}

// answerGroup reports the commit that started at start, then sends every record of g its Result (err: the
// group's) and every batch its BatchDone. Reported first, so that the node's health already shows a failed
// write (/ready 503 write_failed) when a caller hears its 503 store_unavailable.
func (w *writer) answerGroup(root *actor.RootContext, g *group, err error, start time.Time) {
	if w.opts.OnCommit != nil {
		w.opts.OnCommit(CommitInfo{Duration: time.Since(start), Records: len(g.recs), Bytes: g.bytes, Err: err})
	}
	for i, p := range g.pendings {
		answer(w.opts.Log, p, resultOf(g.recs[i], err))
	}
	for _, b := range g.batches {
		b.Finish(root)
	}
}

// commitConfirm is the commit of a two-half commit: once the local write returned, a confirm task takes g and
// answers its records when the confirm is in, so the next group commits while this one waits (it reports true).
func (w *writer) commitConfirm(root *actor.RootContext, g *group, cc ConfirmingCommitter, start time.Time) bool {
	var confirm func() error
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				confirm, err = nil, fmt.Errorf("store: commit panicked: %v", r)
			}
		}()
		confirm, err = cc.CommitHooksConfirm(g.recs)
		return err
	}()
	w.shared.tasks.Go(func(<-chan struct{}) {
		if err == nil && confirm != nil {
			err = confirm()
			if err != nil {
				for _, r := range g.recs {
					if r.Outcome.Status == OutcomeCommitted {
						r.Outcome = Outcome{Status: OutcomeRefused, Err: err}
					}
				}
				err = nil
			}
		}
		w.answerGroup(root, g, err, start)
	})
	return true
}

// commitRecovered turns a panic in the committer into an error for this group's callers: whether anything was
// written is then unknown, and an error answer (a provider retry, maybe a duplicate) never loses a hook.
func commitRecovered(db Committer, recs []*Record) (first uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: commit panicked: %v", r)
		}
	}()
	return db.CommitHooks(recs)
}

// resultOf is the Result of a record of a group whose commit returned err.
func resultOf(r *Record, err error) Result {
	if err != nil {
		return Result{Err: err}
	}
	switch o := &r.Outcome; o.Status {
	case OutcomeCommitted:
		return Result{Seq: o.Seq}
	case OutcomeDuplicate:
		return Result{Duplicate: true, OriginalID: o.OriginalID}
	case OutcomeRefused:
		if o.Err != nil {
			return Result{Err: o.Err}
		}
	}
	return Result{Err: errOutcomeUnset}
}

// answer sends p its one Result. Done has room by contract; a full channel means the caller broke it, and
// blocking here would stall every later group, so the result is dropped and logged instead.
func answer(log zerolog.Logger, p *Pending, r Result) {
	select {
	case p.Done <- r:
	default:
		log.Error().Uint64("seq", r.Seq).AnErr("result", r.Err).
			Msg("store writer: pending record's Done channel is full; result dropped")
	}
}

// failQueuedLocked answers every queued, unstarted record ErrWriterStopped and every queued batch BatchDone.
func (w *writer) failQueuedLocked(root *actor.RootContext) {
	for _, b := range w.queue {
		failBatch(root, w.opts.Log, b)
	}
	clear(w.queue)
	w.queue = w.queue[:0]
}

// failBatch answers every unstarted record of b ErrWriterStopped, then b's BatchDone.
func failBatch(root *actor.RootContext, log zerolog.Logger, b *Batch) {
	for _, p := range b.Records {
		if p.start() {
			answer(log, p, Result{Err: ErrWriterStopped})
		}
	}
	b.Finish(root)
}
