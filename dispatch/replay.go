package dispatch

import (
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// Replay job kinds and states (inventory F.5).
const (
	ReplayDLQ = "dlq"

	JobRunning   = "running"
	JobPaused    = "paused"
	JobCancelled = "cancelled"
	JobDone      = "done"
)

// Replay defaults: rate in rows per second, lag in milliseconds.
const (
	DefaultReplayRate  = 1000
	MaxReplayRate      = 100_000
	DefaultReplayLagMS = 2000
)

// ErrReplayKind refuses a replay job of a kind this node does not run.
var ErrReplayKind = errors.New("dispatch: unsupported replay kind")

// ReplayRequest describes a new replay job.
type ReplayRequest struct {
	Kind     string
	Source   string
	Since    int64 // unix ms, 0 = unbounded
	Until    int64
	Rate     float64 // rows per second (default 1,000, at most 100,000)
	MaxLagMS int64   // drip only while the oldest due row is at most this old (default 2,000)
}

// CreateReplay records a replay job, durably, and returns it. Only rows dead at the
// time of creation move; the replayer picks the job up on its next tick (and after a
// restart, from its durable cursor).
func (d *Dispatcher) CreateReplay(req ReplayRequest) (store.ReplayJob, error) {
	if req.Kind != ReplayDLQ {
		return store.ReplayJob{}, fmt.Errorf("%w: %q", ErrReplayKind, req.Kind)
	}
	db := d.db()
	if db == nil {
		return store.ReplayJob{}, store.ErrClosed
	}
	if req.Rate <= 0 {
		req.Rate = DefaultReplayRate
	}
	req.Rate = min(req.Rate, MaxReplayRate)
	if req.MaxLagMS <= 0 {
		req.MaxLagMS = DefaultReplayLagMS
	}
	j := store.ReplayJob{
		ID: newJobID(d.now()), Kind: req.Kind, Source: req.Source, Since: req.Since, Until: req.Until,
		Rate: req.Rate, MaxLagMS: req.MaxLagMS, CreatedAt: d.now().UnixMilli(), State: JobRunning,
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

func newJobID(now time.Time) [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[6:])
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	return id
}

// replayer drips replay jobs: every tick each running job moves at most rate×tick rows,
// and only while dispatch keeps up (the oldest due row is younger than max_lag), so a
// replay never buries live traffic. Progress is committed with the moved rows, so a
// restart resumes where it stopped.
type replayer struct {
	d      *Dispatcher
	tasks  *task.Group // the ticker; one group per incarnation
	credit map[[16]byte]float64
	last   time.Time
}

const replayTick = 100 * time.Millisecond

type replayTickMsg struct{}

// NewReplayerProps returns the replayer's props.
func NewReplayerProps(d *Dispatcher) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &replayer{d: d} })
}

func (r *replayer) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		r.credit = map[[16]byte]float64{}
		r.last = r.d.now()
		r.tasks = &task.Group{}
		self, root := ctx.Self(), ctx.ActorSystem().Root
		r.tasks.Every(replayTick, func() { root.Send(self, replayTickMsg{}) })
	case replayTickMsg:
		r.tick()
	case *actor.Stopping, *actor.Restarting:
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
		if j.State != JobRunning {
			delete(r.credit, j.ID)
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
		moved, err := db.ReplayDeadStep(j, n, now.UnixMilli())
		if err != nil {
			r.d.log.Error().Err(err).Msg("replay step failed")
			continue
		}
		r.credit[j.ID] = credit - float64(moved)
		if moved > 0 {
			r.d.tel.ReplayMoved(j.Kind, moved)
		}
	}
}

// ErrNoSuchJob: no replay job has that id.
var ErrNoSuchJob = errors.New("dispatch: no such replay job")

// SteerReplay sets a job's state (running, paused or cancelled); a finished job stays done.
func (d *Dispatcher) SteerReplay(id [16]byte, state string) (store.ReplayJob, error) {
	if state != JobRunning && state != JobPaused && state != JobCancelled {
		return store.ReplayJob{}, fmt.Errorf("dispatch: replay state must be running, paused or cancelled, got %q", state)
	}
	jobs, err := d.Replays()
	if err != nil {
		return store.ReplayJob{}, err
	}
	for _, j := range jobs {
		if j.ID != id {
			continue
		}
		if j.State == JobDone || j.State == JobCancelled {
			return j, nil
		}
		j.State = state
		if err := d.db().PutReplayJob(&j); err != nil {
			return store.ReplayJob{}, err
		}
		return j, nil
	}
	return store.ReplayJob{}, ErrNoSuchJob
}
