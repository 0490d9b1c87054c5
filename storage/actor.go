package storage

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

// Names in the instance tree: the storage subtree (an isolated failure domain) and its compactor, spawned as
// <instance>/storage/compactor.
const (
	SubtreeName   = "storage"
	CompactorName = "compactor"
)

// maxBackoff caps the wait after failed compactions (inventory B.3: "backoff ×2 per failure, jittered, cap 60 s").
const maxBackoff = 60 * time.Second

// defaultRetentionEvery is how often the retention sweep runs when archive.retention_days is set: it scans the
// catalogue, so not every tick.
const defaultRetentionEvery = time.Minute

// ActorOptions configure the compactor actor.
type ActorOptions struct {
	Compactor CompactorOptions
	// Interval is storage.interval_ms: a compaction is tried every Interval (and at once again after a full one).
	Interval time.Duration
	// RetentionEvery is how often Retain runs (default one minute); only with Compactor.Retention set.
	RetentionEvery time.Duration
	// Pacing (storage.pace_percent, max_lag_segments, max_lag_ms): while ingest commits and the archive backlog
	// is within MaxLagBytes and MaxLagAge, compactions take at most PacePercent of the wall time (0 or 100: not
	// paced); beyond either bound, or with ingest idle, the compactor runs flat out.
	PacePercent int
	MaxLagBytes int64
	MaxLagAge   time.Duration
	Tel         *telemetry.Telemetry
}

// NewCompactorProps returns the props of the compactor actor. Every Interval it runs one compaction (and, every
// RetentionEvery, the retention sweep) in a task of its own, so its mailbox stays open to a Stop while a PUT is
// in flight; the result comes back as a message. A failed compaction waits Interval×2^failures (jittered ±20 %,
// capped at 60 s) before the next try, which takes the same hooks. A restarted actor starts from the store.
//
// The compactor yields to ingest (pace): while hooks are committed, every few ms of its work (Pacer) is followed
// by a pause of that work×(100−PacePercent)/PacePercent, inside a compaction as well as after it, so on a node
// whose cores ingest keeps busy it takes at most PacePercent of the time, and its reads, disk writes and store
// batches are spread out instead of holding ingest's commits behind them for a whole compaction. The archive
// then lags, but boundedly: once the backlog (pending obligations × the last segment's bytes per record)
// reaches MaxLagBytes, or the newest hook of a segment that left more behind is MaxLagAge old, it runs flat out
// again until it is back within both; with no commit during a compaction (ingest idle) it never pauses.
func NewCompactorProps(o ActorOptions) *actor.Props {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.RetentionEvery <= 0 {
		o.RetentionEvery = defaultRetentionEvery
	}
	return actor.PropsFromProducer(func() actor.Actor { return &compactorActor{o: o} })
}

type compactorActor struct {
	o ActorOptions

	c          *Compactor
	tasks      *task.Group // the ticker and the running compaction; one group per incarnation
	cancel     context.CancelFunc
	running    bool
	failures   int
	notBefore  time.Time
	lastRetain time.Time
	seqAtStart uint64  // the store's next seq when it started: a commit since means ingest is busy
	perRecord  float64 // segment bytes per record of the last segment, to weigh the backlog
	lagging    bool    // the last compaction found the archive beyond its lag bounds: the next is not paced
}

// compactTick asks for one compaction.
type compactTick struct{}

// compactDone is a compaction task's result.
type compactDone struct {
	res       Result
	err       error
	retained  bool
	deleted   int
	retainErr error
	unpaid    time.Duration // work since the pacer's last pause (the whole run when not paced)
}

func (a *compactorActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c, err := NewCompactor(a.o.Compactor)
		if err != nil {
			panic(err) // a config the compactor cannot run fails the boot with this error
		}
		a.c = c
		a.tasks = &task.Group{}
		a.lastRetain = time.Now()
		self, root := ctx.Self(), ctx.ActorSystem().Root
		a.tasks.Every(a.o.Interval, func() { root.Send(self, compactTick{}) })
	case compactTick:
		a.start(ctx)
	case *compactDone:
		a.done(ctx, m)
	case *actor.Stopping, *actor.Restarting:
		if a.cancel != nil {
			a.cancel()
		}
		if a.tasks != nil {
			a.tasks.Stop()
			a.tasks = nil
		}
	}
}

func (a *compactorActor) start(ctx actor.Context) {
	now := time.Now()
	if a.running || now.Before(a.notBefore) {
		return
	}
	retain := a.o.Compactor.Retention > 0 && now.Sub(a.lastRetain) >= a.o.RetentionEvery
	cctx, cancel := context.WithCancel(context.Background())
	var pace *Pacer
	if db := a.o.Compactor.DB(); db != nil {
		a.seqAtStart = db.NextSeq()
		if !a.lagging && !a.behind(db, Result{}, now) {
			pace = NewPacer(cctx, a.o.PacePercent, committing(db))
		}
	}
	self, root, c := ctx.Self(), ctx.ActorSystem().Root, a.c
	started := a.tasks.Go(func(<-chan struct{}) {
		d := &compactDone{retained: retain}
		d.res, d.err = c.CompactPaced(cctx, pace)
		if retain {
			d.deleted, d.retainErr = c.Retain(cctx)
		}
		d.unpaid = pace.Unpaid(now)
		root.Send(self, d)
	})
	if !started {
		cancel()
		return
	}
	a.running, a.cancel = true, cancel
}

// committing tells, each time it is asked, whether db committed a hook since it was last asked (or made): the
// pacer's sign that ingest is busy.
func committing(db *store.DB) func() bool {
	last := db.NextSeq()
	return func() bool {
		n := db.NextSeq()
		busy := n != last
		last = n
		return busy
	}
}

func (a *compactorActor) done(ctx actor.Context, d *compactDone) {
	a.running = false
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
	tel := a.o.Tel
	if db := a.o.Compactor.DB(); db != nil && tel != nil {
		tel.ArchivePending(db.Counts().ArchivePending)
	}
	if d.retained {
		a.lastRetain = time.Now()
		if tel != nil {
			if d.retainErr != nil {
				tel.CompactFailed(StageRetention, d.retainErr, a.o.RetentionEvery)
			}
			tel.RetentionDeleted(d.deleted)
		}
	}
	if d.err != nil {
		a.failures++
		wait := backoff(a.o.Interval, a.failures, rand.Float64())
		a.notBefore = time.Now().Add(wait)
		if tel != nil {
			stage := StageRead
			var se *StageError
			if errors.As(d.err, &se) {
				stage = se.Stage
			}
			tel.CompactFailed(stage, d.err, wait)
		}
		return
	}
	a.failures, a.notBefore = 0, time.Time{}
	if s := d.res.Segment; s != nil && tel != nil {
		tel.Compacted(telemetry.CompactEvent{Key: s.Segment.SegmentKey, FirstSeq: s.Segment.FirstSeq,
			LastSeq: s.Segment.LastSeq, Records: s.Records, Bytes: s.Segment.Bytes, Reclaimed: s.Reclaimed,
			Duration: s.Duration})
	}
	now := time.Now()
	pause := a.pause(d.res, d.unpaid, now)
	if pause > 0 {
		a.notBefore = now.Add(pause)
	}
	if !d.res.More {
		return
	}
	if pause <= 0 {
		ctx.Send(ctx.Self(), compactTick{})
		return
	}
	if a.tasks == nil {
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	a.tasks.Go(func(stop <-chan struct{}) {
		t := time.NewTimer(pause)
		defer t.Stop()
		select {
		case <-t.C:
			root.Send(self, compactTick{})
		case <-stop:
		}
	})
}

// pause is how long the compactor waits after a compaction that worked for worked and returned res: 0 unless
// it is paced (see NewCompactorProps) — pacing on, hooks committed since the compaction started, and the
// backlog within MaxLagBytes and MaxLagAge.
func (a *compactorActor) pause(res Result, worked time.Duration, now time.Time) time.Duration {
	p := a.o.PacePercent
	db := a.o.Compactor.DB()
	if s := res.Segment; s != nil && s.Records > 0 {
		a.perRecord = float64(s.Segment.Bytes) / float64(s.Records)
	}
	if db == nil {
		return 0
	}
	a.lagging = a.behind(db, res, now)
	if p <= 0 || p >= 100 || worked <= 0 || db.NextSeq() == a.seqAtStart || a.lagging {
		return 0
	}
	return worked * time.Duration(100-p) / time.Duration(p)
}

// behind tells whether the archive lags beyond its bounds, so the compactor runs flat out: a backlog of
// MaxLagBytes or more, or res's segment leaving more behind with its newest hook MaxLagAge old.
func (a *compactorActor) behind(db *store.DB, res Result, now time.Time) bool {
	if a.o.MaxLagBytes > 0 && float64(db.Counts().ArchivePending)*a.perRecord >= float64(a.o.MaxLagBytes) {
		return true
	}
	s := res.Segment
	return s != nil && res.More && a.o.MaxLagAge > 0 && now.Sub(time.UnixMilli(s.Segment.MaxReceivedAt)) >= a.o.MaxLagAge
}

// backoff is the wait after failures consecutive failed compactions: interval doubled per failure, ±20 %
// jitter (r in [0, 1)), never above maxBackoff.
func backoff(interval time.Duration, failures int, r float64) time.Duration {
	d := interval << min(failures-1, 20)
	if d <= 0 || d > maxBackoff {
		d = maxBackoff
	}
	d += time.Duration((r*0.4 - 0.2) * float64(d))
	return min(d, maxBackoff)
}
