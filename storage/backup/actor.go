package backup

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// ActorOptions configure the backup runner actor.
type ActorOptions struct {
	Runner Options
	// Interval is backup.interval_ms: the recovery point of wal.type disk.
	Interval time.Duration
	// VerifyInterval is backup.verify_interval_ms; 0 turns the read-back off.
	VerifyInterval time.Duration
	// FinalTimeout bounds the last backup a clean stop takes, with the wait for a run in progress.
	FinalTimeout time.Duration
	DB           func() *store.DB
	Tel          *telemetry.Telemetry
}

// Back-off after a failed run: doubling from retryMin to retryMax, ±20 % jitter.
const (
	retryMin = time.Second
	retryMax = 60 * time.Second
)

// runner is the backup actor. Uploads, verifies and purges are blocking I/O: each runs as one task of the
// actor's group and reports back with a message, one at a time (a verify never reads what a purge deletes),
// so Receive never waits on the network. Its Stopping (a clean stop, after ingest has stopped) waits for the
// running job and takes one last backup, both within FinalTimeout.
type runner struct {
	o     ActorOptions
	r     *Runner
	tasks *task.Group
	ctx   context.Context // cancelled when the incarnation ends
	stop  context.CancelFunc

	busy          bool
	pendingRun    bool
	pendingVerify bool
	attempt       int // failed runs in a row
}

// Messages the runner sends itself.
type (
	runTick    struct{}
	verifyTick struct{}
	// The reports of a job carry the group of the incarnation that started it: a crashed incarnation's job
	// reports to the next one (same PID), which must not take it for its own job's end.
	runDone struct {
		g     *task.Group
		res   *Result
		err   error
		start time.Time
	}
	verifyDone struct{ g *task.Group }
	seeded     struct{ g *task.Group }
)

// NewActorProps returns the props of the backup runner actor.
func NewActorProps(o ActorOptions) *actor.Props {
	if o.FinalTimeout <= 0 {
		o.FinalTimeout = 15 * time.Second
	}
	return actor.PropsFromProducer(func() actor.Actor { return &runner{o: o} })
}

func (a *runner) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.r = NewRunner(a.o.Runner)
		a.tasks = &task.Group{}
		a.ctx, a.stop = context.WithCancel(context.Background())
		self, root := ctx.Self(), ctx.ActorSystem().Root
		if a.o.VerifyInterval > 0 {
			a.tasks.Every(a.o.VerifyInterval, func() { root.Send(self, verifyTick{}) })
		}
		a.busy = true
		g := a.tasks
		a.job(ctx, func(c context.Context) any { a.seed(c); return seeded{g: g} })
	case seeded:
		if m.g != a.tasks {
			return
		}
		a.busy = false
		a.after(ctx, a.o.Interval, runTick{})
	case runTick:
		a.pendingRun = true
		a.next(ctx)
	case verifyTick:
		a.pendingVerify = true
		a.next(ctx)
	case runDone:
		if m.g != a.tasks {
			return
		}
		a.busy = false
		a.finished(m)
		d := a.o.Interval
		if m.err != nil {
			d = a.backoff()
		}
		a.after(ctx, d, runTick{})
		a.next(ctx)
	case verifyDone:
		if m.g != a.tasks {
			return
		}
		a.busy = false
		a.next(ctx)
	case *actor.Stopping:
		a.final()
	case *actor.Restarting:
		a.stop()
		a.tasks.Stop()
	}
}

// next starts the job that is due, unless one runs: a run before a verify, so the verify reads the newest.
func (a *runner) next(ctx actor.Context) {
	if a.busy {
		return
	}
	switch {
	case a.pendingRun:
		a.pendingRun = false
		db := a.o.DB()
		if db == nil {
			// The store is closed (being reopened): try again after the back-off, as after a failure.
			a.finished(runDone{err: store.ErrClosed, start: time.Now()})
			a.after(ctx, a.backoff(), runTick{})
			return
		}
		a.busy = true
		start, g := time.Now(), a.tasks
		a.job(ctx, func(c context.Context) any {
			res, err := a.r.Run(c, db)
			return runDone{g: g, res: res, err: err, start: start}
		})
	case a.pendingVerify:
		a.pendingVerify = false
		a.busy = true
		g := a.tasks
		a.job(ctx, func(c context.Context) any { a.verify(c); return verifyDone{g: g} })
	}
}

// job runs fn on the group and sends its result to the actor.
func (a *runner) job(ctx actor.Context, fn func(context.Context) any) {
	self, root, c := ctx.Self(), ctx.ActorSystem().Root, a.ctx
	if !a.tasks.Go(func(<-chan struct{}) { root.Send(self, fn(c)) }) {
		a.busy = false
	}
}

// after sends msg to the actor in d, unless the incarnation ends first.
func (a *runner) after(ctx actor.Context, d time.Duration, msg any) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	a.tasks.Go(func(stop <-chan struct{}) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			root.Send(self, msg)
		case <-stop:
		}
	})
}

func (a *runner) backoff() time.Duration {
	d := retryMin << min(a.attempt, 16)
	if d > retryMax || d <= 0 {
		d = retryMax
	}
	a.attempt++
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}

// finished reports a run.
func (a *runner) finished(m runDone) {
	run := telemetry.BackupRun{Duration: time.Since(m.start), Err: m.err}
	switch {
	case errors.Is(m.err, ErrForeignBackup):
		run.Result = telemetry.BackupForeign
	case errors.Is(m.err, ErrPrefixShared):
		run.Result = telemetry.BackupPrefixShared
	case m.err != nil:
		run.Result = telemetry.BackupError
	default:
		a.attempt = 0
		run.Result, run.ID, run.Files, run.Bytes = telemetry.BackupOK, m.res.Manifest.ID, m.res.Files, m.res.Uploaded
		run.TakenAt = time.UnixMilli(m.res.Manifest.CreatedAtMS)
		if len(m.res.Failed) > 0 {
			run.Result = telemetry.BackupPartial
			for _, err := range m.res.Failed {
				run.Err = errors.Join(run.Err, err)
			}
		}
	}
	a.o.Tel.Backup(run)
}

// seed sets the backup age from the newest backup the primary holds, so a restarted node does not report a
// fresh backup it has not taken.
func (a *runner) seed(ctx context.Context) {
	ts := a.o.Runner.Targets
	if len(ts) == 0 {
		return
	}
	id, err := readLatest(ctx, ts[0].Store)
	if err != nil {
		return
	}
	m, err := readManifest(ctx, ts[0].Store, id, a.o.Runner.SigningKey)
	if err != nil {
		return
	}
	a.o.Tel.BackupKnown(time.UnixMilli(m.CreatedAtMS))
}

// verify reads every target's latest backup back.
func (a *runner) verify(ctx context.Context) {
	for _, t := range a.o.Runner.Targets {
		if _, err := Verify(ctx, t.Store, a.o.Runner.SigningKey); err != nil && !errors.Is(err, ErrNoBackup) {
			a.o.Tel.BackupVerifyFailed(t.Name, err)
		}
	}
}

// final ends the incarnation on a clean stop: it waits for the job in progress, then takes the last backup,
// so a node stopped cleanly loses nothing with its host. Both share FinalTimeout.
func (a *runner) final() {
	bound := time.AfterFunc(a.o.FinalTimeout, a.stop)
	defer bound.Stop()
	defer a.stop()
	a.tasks.Stop() // timers end; a running job ends or is cancelled by the bound
	db := a.o.DB()
	if db == nil {
		a.o.Tel.Log.Warn().Msg("no final backup: the store is closed")
		return
	}
	start := time.Now()
	res, err := a.r.Run(a.ctx, db)
	a.finished(runDone{res: res, err: err, start: start})
	if err == nil {
		a.o.Tel.Log.Info().Str("backup", res.Manifest.ID).Dur("duration", time.Since(start)).Msg("final backup taken")
	}
}
