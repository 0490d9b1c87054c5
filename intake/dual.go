package intake

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// Options configures Dual.
type Options struct {
	// DB is the open store (nil while it is closed).
	DB func() *store.DB
	// Commit runs the local half (default: DB().CommitHooksWith); the instance brackets it for its health.
	Commit  func(recs []*store.Record, x store.CommitExtra) (uint64, error)
	Log     Publisher
	Reader  Reader // boot recovery reads the topic through it
	Node    string
	Breaker int // intake.breaker_failures
	// MaxInflight bounds the groups awaiting their confirm (intake.max_inflight).
	MaxInflight       int
	ReconcileInterval time.Duration
	Tel               *telemetry.Telemetry
	Logger            zerolog.Logger
}

// entry states in the pending set.
const (
	stateInflight  = iota // both halves running
	stateLocalOnly        // synced here, not confirmed in the log: the reconciler republishes it
	stateLogOnly          // confirmed in the log, the local write failed: the reconciler applies it
)

type pendingEntry struct {
	e     Entry
	state int
	since time.Time
}

// logged is a confirmed record holding hooks at or above the watermark's seq: the watermark's offset of its
// partition cannot pass it.
type logged struct {
	partition int32
	offset    int64
	last      uint64
}

// Dual is the two-half committer of wal.type dual (store.ConfirmingCommitter), its pending set and reconciler,
// and boot recovery.
type Dual struct {
	opts       Options
	br         breaker
	sem        chan struct{}
	recovering atomic.Bool
	tasks      task.Group

	// Lock order: flushMu, then mu. The store's commit locks are held when mu is taken (BeforeWrite), so
	// nothing holding mu calls into the store.
	flushMu sync.Mutex
	// mu guards the pending set and the watermark state.
	mu      sync.Mutex
	pend    map[uint64]*pendingEntry
	ids     map[[16]byte]uint64
	next    uint64 // one past the highest seq committed or applied: the watermark's seq with nothing pending
	logs    []logged
	high    map[int32]int64 // per partition, one past the highest confirmed offset
	wmDirty bool
}

// New builds the committer; it refuses every commit (ErrRecovering) until Run's recovery is done.
func New(o Options) *Dual {
	if o.Commit == nil {
		o.Commit = func(recs []*store.Record, x store.CommitExtra) (uint64, error) {
			db := o.DB()
			if db == nil {
				return 0, store.ErrClosed
			}
			return db.CommitHooksWith(recs, x)
		}
	}
	d := &Dual{opts: o, sem: make(chan struct{}, max(1, o.MaxInflight)), pend: map[uint64]*pendingEntry{},
		ids: map[[16]byte]uint64{}, high: map[int32]int64{}}
	d.br.limit = max(1, o.Breaker)
	d.recovering.Store(true)
	o.Tel.IntakeReady(false)
	return d
}

// Recovering reports whether boot recovery is still running (/ready recovering; every commit refused).
func (d *Dual) Recovering() bool { return d.recovering.Load() }

// Ready reports whether the log takes publishes: recovery done and the breaker closed.
func (d *Dual) Ready() bool { return !d.recovering.Load() && d.br.allow() }

// PendingID reports whether id is a hook of the pending set (in flight, or half-persisted): a retry of it is
// ErrIntakePending.
func (d *Dual) PendingID(id [16]byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.ids[id]
	return ok
}

// PendingCount is the size of the pending set.
func (d *Dual) PendingCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pend)
}

// CommitHooks is CommitHooksConfirm waited out (store.Committer).
func (d *Dual) CommitHooks(recs []*store.Record) (uint64, error) {
	confirm, err := d.CommitHooksConfirm(recs)
	if err != nil || confirm == nil {
		return 0, err
	}
	if err := confirm(); err != nil {
		for _, r := range recs {
			if r.Outcome.Status == store.OutcomeCommitted {
				r.Outcome = store.Outcome{Status: store.OutcomeRefused, Err: err}
			}
		}
	}
	return 0, nil
}

// CommitHooksConfirm runs the two halves of one group: the publish starts once the store decided every record's
// outcome (seqs and dedupe), just before the synced write, so they run in parallel. It returns after the local
// write; confirm waits for the log.
func (d *Dual) CommitHooksConfirm(recs []*store.Record) (confirm func() error, err error) {
	if d.recovering.Load() {
		return nil, store.ErrRecovering
	}
	if !d.br.allow() {
		d.opts.Tel.IntakeFailure("breaker_open")
		return nil, store.ErrIntakeUnavailable
	}
	d.sem <- struct{}{}
	var (
		ch      <-chan Confirm
		entries []Entry
	)
	_, err = d.opts.Commit(recs, store.CommitExtra{Pending: true, BeforeWrite: func(rs []*store.Record) {
		entries = d.track(rs)
		ch = d.opts.Log.Publish(entries)
	}})
	d.markPendingDuplicates(recs)
	if ch == nil {
		<-d.sem
		return nil, err
	}
	localErr := err
	if localErr != nil {
		d.opts.Tel.IntakeFailure("local_write")
	}
	return func() error {
		c := <-ch
		<-d.sem
		d.settle(entries, c, localErr == nil)
		switch {
		case localErr != nil:
			return localErr
		case c.Err != nil:
			return store.ErrIntakeUnavailable
		}
		return nil
	}, nil
}

// track adds the committed records of a group to the pending set, in flight, and returns their entries.
func (d *Dual) track(rs []*store.Record) []Entry {
	now := time.Now()
	entries := make([]Entry, 0, len(rs))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range rs {
		if r.Outcome.Status != store.OutcomeCommitted {
			continue
		}
		e := Entry{Seq: r.Outcome.Seq, ID: r.ID, Bytes: store.AppendEntry(nil, r, r.Outcome.Seq)}
		entries = append(entries, e)
		d.pend[e.Seq] = &pendingEntry{e: e, state: stateInflight, since: now}
		d.ids[e.ID] = e.Seq
		d.next = max(d.next, e.Seq+1)
	}
	return entries
}

// markPendingDuplicates turns a duplicate whose original is in the pending set into ErrIntakePending: the
// original is not acked yet, so neither is its retry.
func (d *Dual) markPendingDuplicates(recs []*store.Record) {
	for _, r := range recs {
		if r.Outcome.Status == store.OutcomeDuplicate && d.PendingID(r.Outcome.OriginalID) {
			r.Outcome = store.Outcome{Status: store.OutcomeRefused, Err: store.ErrIntakePending}
		}
	}
}

// settle applies one group's outcome to the pending set: both halves held (confirmed, out of the set), or one
// did (half-persisted, left to the reconciler), or neither (out of the set: nothing was promised).
func (d *Dual) settle(entries []Entry, c Confirm, localOK bool) {
	d.opts.Tel.IntakePublished(c.Took, c.Err)
	if d.br.record(c.Err == nil) {
		d.opts.Tel.IntakeReady(false)
	}
	if c.Err != nil {
		d.opts.Logger.Warn().Err(c.Err).Int("hooks", len(entries)).Bool("local_synced", localOK).Msg("intake publish failed")
	}
	d.mu.Lock()
	switch {
	case c.Err == nil && localOK:
		seqs := d.confirmedLocked(entries, c.Offsets)
		d.mu.Unlock()
		d.flush(seqs)
		return
	case c.Err == nil:
		d.setStateLocked(entries, stateLogOnly)
		d.noteLoggedLocked(entries, c.Offsets)
	case localOK:
		d.setStateLocked(entries, stateLocalOnly)
	default:
		for _, e := range entries {
			delete(d.pend, e.Seq)
			delete(d.ids, e.ID)
		}
	}
	d.mu.Unlock()
}

func (d *Dual) setStateLocked(entries []Entry, state int) {
	for _, e := range entries {
		if p := d.pend[e.Seq]; p != nil {
			p.state = state
		}
	}
}

// noteLoggedLocked remembers where entries were confirmed, for the watermark's offsets.
func (d *Dual) noteLoggedLocked(entries []Entry, offsets map[int32]int64) {
	var last uint64
	for _, e := range entries {
		last = max(last, e.Seq)
	}
	for p, o := range offsets {
		d.logs = append(d.logs, logged{partition: p, offset: o, last: last})
		d.high[p] = max(d.high[p], o+1)
	}
	d.wmDirty = true
}

// confirmedLocked takes entries out of the pending set (both halves hold) and returns their seqs, whose pending
// keys the caller deletes with the next watermark (flush, after releasing mu).
func (d *Dual) confirmedLocked(entries []Entry, offsets map[int32]int64) []uint64 {
	seqs := make([]uint64, 0, len(entries))
	for _, e := range entries {
		delete(d.pend, e.Seq)
		delete(d.ids, e.ID)
		seqs = append(seqs, e.Seq)
	}
	d.noteLoggedLocked(entries, offsets)
	return seqs
}

// flush writes the watermark and deletes seqs' pending keys. flushMu keeps the writes in the order their
// watermarks were computed; mu is not held across the write (the commit path takes mu under the store's
// locks). A failure is logged only: the next write carries a newer watermark, a stale one costs a longer
// replay, and a pending key left behind a republish the log's readers skip.
func (d *Dual) flush(seqs []uint64) {
	d.flushMu.Lock()
	defer d.flushMu.Unlock()
	db := d.opts.DB()
	if db == nil {
		return
	}
	d.mu.Lock()
	wm := d.watermarkLocked()
	d.wmDirty = false
	d.mu.Unlock()
	if err := db.IntakeConfirmed(AppendWatermark(nil, wm), seqs); err != nil {
		d.mu.Lock()
		d.wmDirty = true
		d.mu.Unlock()
		d.opts.Logger.Warn().Err(err).Msg("cannot write the intake watermark")
	}
}

// watermarkLocked is the watermark now: its seq is the lowest seq still pending (else one past the highest
// committed), and each partition's offset the lowest confirmed record holding a hook at or above it (else one
// past the highest confirmed offset).
func (d *Dual) watermarkLocked() Watermark {
	seq := d.next
	for s := range d.pend {
		seq = min(seq, s)
	}
	d.logs = slices.DeleteFunc(d.logs, func(l logged) bool { return l.last < seq })
	off := make(map[int32]int64, len(d.high))
	for p, h := range d.high {
		off[p] = h
	}
	for _, l := range d.logs {
		off[l.partition] = min(off[l.partition], l.offset)
	}
	return Watermark{Seq: seq, Offsets: off}
}

// Intake states of Status.
const (
	StateRecovering = "recovering" // boot recovery is replaying the log: every commit refused
	StateDown       = "down"       // the breaker is open: the log takes no publish, commits refused
	StateUp         = "up"
)

// PartitionStatus is one partition of the intake topic as this node last saw it.
type PartitionStatus struct {
	Partition int32
	Offset    int64 // one past the highest offset this node had confirmed there
	Watermark int64 // where a replay of the partition starts (m:intake_offset's offset)
}

// Status is the intake log's side of the node (GET /v1/wal's intake object).
type Status struct {
	Node       string
	State      string
	Pending    int    // hooks of the pending set: in flight, or half-persisted
	Watermark  uint64 // every hook of this node below this seq is in the store
	Partitions []PartitionStatus
}

// Status reports the node's intake state, its pending set's size and its watermark.
func (d *Dual) Status() Status {
	st := Status{Node: d.opts.Node, State: StateUp}
	switch {
	case d.recovering.Load():
		st.State = StateRecovering
	case !d.br.allow():
		st.State = StateDown
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.watermarkLocked()
	st.Pending, st.Watermark = len(d.pend), w.Seq
	for _, p := range slices.Sorted(maps.Keys(d.high)) {
		st.Partitions = append(st.Partitions, PartitionStatus{Partition: p, Offset: d.high[p], Watermark: w.Offsets[p]})
	}
	return st
}

// Stop stops the reconciler (and a recovery still running) and waits for them.
func (d *Dual) Stop() { d.tasks.Stop() }
