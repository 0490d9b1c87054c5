package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// Replay job kinds and states (inventory F.5).
const (
	ReplayDLQ     = store.ReplayKindDLQ
	ReplayArchive = store.ReplayKindArchive

	JobRunning   = "running"
	JobPaused    = "paused"
	JobCancelled = "cancelled"
	JobDone      = "done"
)

// Replay defaults: rate in items per second, lag in milliseconds.
const (
	DefaultReplayRate  = store.DefaultReplayRate
	MaxReplayRate      = store.MaxReplayRate
	DefaultReplayLagMS = store.DefaultReplayLagMS
)

// ErrReplayKind refuses a replay job of a kind this node does not run.
var ErrReplayKind = errors.New("dispatch: unsupported replay kind")

// ReplayRequest describes a new replay job.
type ReplayRequest struct {
	Kind   string
	Source string
	Tenant string // archive jobs only
	// Since and Until: a dlq job's rows dead in [Since, Until] (0 = unbounded); an archive job's hooks received
	// in [Since, Until), both required, Until not after now. Unix ms.
	Since    int64
	Until    int64
	Rate     float64 // items per second (default 1,000, at most 100,000)
	MaxLagMS int64   // drip only while the oldest due row is at most this old (default 2,000)
}

// ArchiveReader reads the archive for archive replay jobs: one batch of hooks received in [from, to) after
// pos (storage.ReplayNext over the node's catalogue and blob store). The instance installs it: dispatch meets
// the storage role only in the store and through this function, never in its package.
type ArchiveReader func(ctx context.Context, from, to int64, pos store.ArchiveCursor) (store.ArchiveBatch, error)

// SetArchiveReader installs the archive reader; call it before the replayer starts. Without one, archive jobs
// are refused at creation and those already recorded wait (logged) until a node with the storage role runs them.
func (d *Dispatcher) SetArchiveReader(fn ArchiveReader) { d.archive = fn }

// CreateReplay records a replay job, durably, and returns it. A dlq job moves only rows dead at the time of
// creation; an archive job commits again the archived hooks received in its window. The replayer picks the job
// up on its next tick (and after a restart, from its durable cursor).
func (d *Dispatcher) CreateReplay(req ReplayRequest) (store.ReplayJob, error) {
	if req.Kind == ReplayArchive && d.archive == nil {
		return store.ReplayJob{}, fmt.Errorf("%w: %q needs the storage role's archive on this node", ErrReplayKind, req.Kind)
	}
	if req.Kind != ReplayArchive && req.Tenant != "" {
		return store.ReplayJob{}, fmt.Errorf("dispatch: a %s replay has no tenant filter", req.Kind)
	}
	db := d.db()
	if db == nil {
		return store.ReplayJob{}, store.ErrClosed
	}
	j, err := store.NewReplayJob(store.ReplayJob{Kind: req.Kind, Source: req.Source, Tenant: req.Tenant,
		Since: req.Since, Until: req.Until, Rate: req.Rate, MaxLagMS: req.MaxLagMS}, d.now())
	if errors.Is(err, store.ErrReplayJob) && req.Kind != ReplayDLQ && req.Kind != ReplayArchive {
		return store.ReplayJob{}, fmt.Errorf("%w: %q", ErrReplayKind, req.Kind)
	}
	if err != nil {
		return store.ReplayJob{}, fmt.Errorf("dispatch: %w", err)
	}
	if err := db.PutReplayJob(&j); err != nil {
		return store.ReplayJob{}, fmt.Errorf("dispatch: cannot record replay job: %w", err)
	}
	return j, nil
}

// Replays lists the recorded replay jobs.
func (d *Dispatcher) Replays() ([]store.ReplayJob, error) {
	db := d.db()
	if db == nil {
		return nil, store.ErrClosed
	}
	return db.ReplayJobs()
}

// replayer drips replay jobs: every tick each running job moves at most rate×tick rows
// (hooks, for an archive job), and only while dispatch keeps up (the oldest due row is
// younger than max_lag), so a replay never buries live traffic. Progress is committed with
// the moved rows, so a restart resumes where it stopped.
//
// An archive job's segment is read by a task (a blob GET must not hold the mailbox) into
// archive[job]; its hooks are then committed a rate's worth per tick, each step with the
// job's cursor. The cache is valid only at the cursor it was read for: a job steered or
// restarted elsewhere reads again from its stored cursor.
type replayer struct {
	d       *Dispatcher
	tasks   *task.Group // the ticker and the archive reads; one group per incarnation
	cancel  context.CancelFunc
	credit  map[[16]byte]float64
	archive map[[16]byte]*archiveRead
	waiting map[[16]byte]bool // archive jobs logged as waiting for a reader
	last    time.Time
	// readFn starts a task reading archive job j's segment at cursor at; false when the group is stopping.
	readFn func(id [16]byte, j store.ReplayJob, at store.ArchiveCursor) bool
}

// archiveRead is one archive job's segment: read for cursor at, hooks before next done.
type archiveRead struct {
	at      store.ArchiveCursor
	loading bool
	batch   store.ArchiveBatch
	next    int
	skipped int       // batch.Skipped, until a step has recorded it
	retryAt time.Time // set when the read failed: read again from then
}

// archiveReadDone is a read task's result.
type archiveReadDone struct {
	id    [16]byte
	at    store.ArchiveCursor
	batch store.ArchiveBatch
	err   error
}

const replayTick = 100 * time.Millisecond

// archiveReadTimeout bounds one segment read of an archive job; archiveRetry is the wait after a read that
// failed (a catalogue or blob store error, not a skipped segment).
const (
	archiveReadTimeout = 2 * time.Minute
	archiveRetry       = 5 * time.Second
)

type replayTickMsg struct{}

// NewReplayerProps returns the replayer's props.
func NewReplayerProps(d *Dispatcher) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &replayer{d: d} })
}

func (r *replayer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		r.credit = map[[16]byte]float64{}
		r.archive = map[[16]byte]*archiveRead{}
		r.waiting = map[[16]byte]bool{}
		r.last = r.d.now()
		r.tasks = &task.Group{}
		var tctx context.Context
		tctx, r.cancel = context.WithCancel(context.Background())
		self, root := ctx.Self(), ctx.ActorSystem().Root
		r.tasks.Every(replayTick, func() { root.Send(self, replayTickMsg{}) })
		r.readFn = func(id [16]byte, j store.ReplayJob, at store.ArchiveCursor) bool {
			read := r.d.archive
			return r.tasks.Go(func(<-chan struct{}) {
				rctx, cancel := context.WithTimeout(tctx, archiveReadTimeout)
				defer cancel()
				b, err := read(rctx, j.Since, j.Until, at)
				root.Send(self, &archiveReadDone{id: id, at: at, batch: b, err: err})
			})
		}
	case replayTickMsg:
		r.tick()
	case *archiveReadDone:
		if a := r.archive[m.id]; a != nil && a.loading && a.at == m.at {
			if m.err != nil {
				r.d.log.Error().Err(m.err).Str("replay_id", uuid.UUID(m.id).String()).
					Dur("retry_in", archiveRetry).Msg("archive replay: cannot read the archive")
				a.loading, a.retryAt = false, r.d.now().Add(archiveRetry)
				return
			}
			a.loading, a.batch, a.next, a.skipped = false, m.batch, 0, m.batch.Skipped
		}
	case *actor.Stopping, *actor.Restarting:
		if r.cancel != nil {
			r.cancel()
		}
		if r.tasks != nil {
			r.tasks.Stop()
			r.tasks = nil
		}
	}
}

func (r *replayer) tick() {
	db := r.d.db()
	if db == nil {
		return
	}
	now := r.d.now()
	elapsed := now.Sub(r.last).Seconds()
	r.last = now
	jobs, err := db.ReplayJobs()
	if err != nil {
		r.d.log.Error().Err(err).Msg("cannot read replay jobs")
		return
	}
	for i := range jobs {
		j := &jobs[i]
		if j.State != JobRunning || (j.Kind != ReplayDLQ && j.Kind != ReplayArchive) {
			// A lifecycle job is the lifecycle publisher's; a kind this node does not know stays as it is.
			delete(r.credit, j.ID)
			delete(r.archive, j.ID)
			continue
		}
		if j.Kind == ReplayArchive && !r.archiveReady(j) {
			continue
		}
		if at, ok, err := db.OldestDue(); err == nil && ok && now.UnixMilli()-at > j.MaxLagMS {
			r.d.tel.ReplayThrottled("lag")
			continue
		}
		credit := min(r.credit[j.ID]+j.Rate*elapsed, j.Rate) // at most one second of burst
		n := int(credit)
		if n < 1 {
			r.credit[j.ID] = credit
			r.d.tel.ReplayThrottled("rate")
			continue
		}
		var moved int
		switch j.Kind {
		case ReplayDLQ:
			moved, err = db.ReplayDeadStep(j, n, now.UnixMilli())
		case ReplayArchive:
			moved, err = r.archiveStep(db, j, n)
		default:
			continue // a kind this node does not run stays as it is
		}
		if err != nil {
			r.d.log.Error().Err(err).Str("replay_id", uuid.UUID(j.ID).String()).Msg("replay step failed")
			continue
		}
		r.credit[j.ID] = credit - float64(moved)
		if moved > 0 {
			r.d.tel.ReplayMoved(j.Kind, moved)
		}
	}
}

// archiveReady tells whether archive job j has its segment in memory at its stored cursor, starting the read
// when it has not.
func (r *replayer) archiveReady(j *store.ReplayJob) bool {
	if r.d.archive == nil {
		if !r.waiting[j.ID] {
			r.waiting[j.ID] = true
			r.d.log.Warn().Str("replay_id", uuid.UUID(j.ID).String()).
				Msg("archive replay job waits: this node has no storage role to read the archive")
		}
		return false
	}
	at, err := store.ParseArchiveCursor(j.Cursor)
	if err != nil {
		if !r.waiting[j.ID] {
			r.waiting[j.ID] = true
			r.d.log.Error().Err(err).Str("replay_id", uuid.UUID(j.ID).String()).Msg("archive replay job cannot run")
		}
		return false
	}
	a := r.archive[j.ID]
	if a != nil && a.at == at && a.retryAt.IsZero() {
		return !a.loading
	}
	if a != nil && a.at == at && r.d.now().Before(a.retryAt) {
		return false
	}
	a = &archiveRead{at: at, loading: true}
	if !r.readFn(j.ID, *j, at) {
		return false
	}
	r.archive[j.ID] = a
	return false
}

// archiveStep commits up to n hooks of archive job j's segment (those its filters keep, each bound to its
// source's current sinks) with the job's new cursor, in one synced batch. A hook whose source is gone or has
// no sinks is passed over. The job is done when the reader found nothing after the cursor.
func (r *replayer) archiveStep(db Store, j *store.ReplayJob, n int) (int, error) {
	a := r.archive[j.ID]
	b := &a.batch
	rid := uuid.UUID(j.ID).String()
	var recs []*store.Record
	cur := a.at
	k := a.next
	for ; k < len(b.Hooks) && len(recs) < n; k++ {
		h := &b.Hooks[k].Hook
		cur.Segment, cur.Seq = b.Segment.FirstSeq, b.Hooks[k].Seq
		if (j.Source != "" && h.Source != j.Source) || (j.Tenant != "" && h.Tenant != j.Tenant) {
			continue
		}
		sinks := r.d.bindings(h.Source)
		if len(sinks) == 0 {
			continue
		}
		recs = append(recs, &store.Record{ID: h.ID, Tenant: h.Tenant, Source: h.Source, ReceivedAt: h.ReceivedAt,
			Size: uint32(len(h.Body)), Value: store.AppendHook(nil, h), Sinks: sinks, ReplayID: rid})
	}
	finished := k == len(b.Hooks)
	if finished {
		cur = b.Next
	}
	done := finished && b.Done
	moved, err := db.RedriveArchivedStep(j, recs, cur, a.skipped, done)
	if err != nil {
		delete(r.archive, j.ID) // read again from the stored cursor
		return 0, err
	}
	if a.skipped > 0 {
		r.d.log.Warn().Str("replay_id", rid).Int("segments", a.skipped).Int64("skipped_total", j.Skipped).
			Msg("archive replay: segments skipped, their objects are gone or damaged")
	}
	if j.State != JobRunning {
		delete(r.archive, j.ID)
		return moved, nil
	}
	a.at, a.next, a.skipped = cur, k, 0
	if finished {
		delete(r.archive, j.ID)
	}
	return moved, nil
}

// bindings are the current sinks of source as delivery rows bind them (nil when the source is gone).
func (d *Dispatcher) bindings(source string) []store.SinkBinding {
	rs := d.routes[source]
	if len(rs) == 0 {
		return nil
	}
	out := make([]store.SinkBinding, len(rs))
	for i, rt := range rs {
		out[i] = store.SinkBinding{Index: uint16(i), Type: rt.typ, Ordered: rt.ordered}
	}
	return out
}

// ErrNoSuchJob: no replay job has that id.
var ErrNoSuchJob = errors.New("dispatch: no such replay job")

// SteerReplay sets a job's state (running, paused or cancelled); a finished job stays done.
func (d *Dispatcher) SteerReplay(id [16]byte, state string) (store.ReplayJob, error) {
	if state != JobRunning && state != JobPaused && state != JobCancelled {
		return store.ReplayJob{}, fmt.Errorf("dispatch: replay state must be running, paused or cancelled, got %q", state)
	}
	db := d.db()
	if db == nil {
		return store.ReplayJob{}, store.ErrClosed
	}
	j, err := db.SteerReplayJob(id, state)
	if errors.Is(err, store.ErrNotFound) {
		return store.ReplayJob{}, ErrNoSuchJob
	}
	return j, err
}
