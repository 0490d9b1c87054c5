package instance

import (
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/sources"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// storeOwner is the child that owns the RocksDB handle: it opens the store when it
// starts (a store that refuses to open fails the boot) and closes it when it stops.
// Everything after it in the tree reaches the handle through the instance.
//
// It also keeps the store writable (inventory E.1). After one failed write RocksDB
// refuses writes until it is reopened, so a failed write asks the owner to recover:
// at most once per store.reopen_min_ms it closes and reopens the store, then probes it
// with a synced write; a reopen or probe that fails is tried again after a back-off
// doubling from store.reopen_min_ms to store.reopen_max_ms, jittered. Meanwhile commits
// fail (the handle is closed or refuses them), so ingest answers 503 store_unavailable,
// and /ready stays 503 until a write succeeds. The owner never answers a caller: a
// started group is answered by its commit, whatever it returns.
//
// Its watchdog flips /ready to 503 commit_stalled while a commit has run longer than
// store.commit_stall_ms, and counts each such commit once; the commit is waited for.
type storeOwner struct {
	i     *Instance
	tasks *task.Group // the watchdog and the pending retry; one group per incarnation

	recovering bool
	attempt    int       // back-off exponent of the next retry
	lastReopen time.Time // the last reopen, for the once-per-reopen_min_ms bound
	recovered  time.Time // when the last recovery ended: failures reported before it are stale
}

// storeWriteFailed asks the owner to recover the store; at is when the write failed.
type storeWriteFailed struct{ at time.Time }

// storeRecover is the owner's note to itself that a reopen is due.
type storeRecover struct{}

func newStoreProps(i *Instance) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &storeOwner{i: i} })
}

// storeOwnerID is the PID id of the store owner: a child of the instance's root supervisor.
func storeOwnerID(instance string) string { return instance + "/store" }

// storeWriteFailed records a failed write and asks the store owner to recover. It runs
// on the commit task (any goroutine).
func (i *Instance) storeWriteFailed(at time.Time) {
	i.health.WriteFailed(at)
	i.system.Root.Send(actor.NewPID(i.system.Address(), storeOwnerID(i.cfg.Instance)), &storeWriteFailed{at: at})
}

func (s *storeOwner) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		db, err := s.open()
		if err != nil {
			panic(err)
		}
		s.i.db.Store(db)
		s.i.health.SetStoreOpen(true)
		if s.i.sources != nil && s.i.sources.Kind() == sources.KindPersistent {
			s.i.applySources() // before ingest opens: an API source is never 503 for want of a load
		}
		if s.i.edge != nil {
			s.i.loadRateOverrides() // before ingest opens: an override applies to the first hook
			s.i.loadRoutes()        // before ingest opens: the guard decides the first request on the stored table
		}
		s.tasks = &task.Group{}
		stall := time.Duration(s.i.cfg.Store.CommitStallMS) * time.Millisecond
		s.tasks.Every(max(stall/4, 10*time.Millisecond), func() {
			// A few atomics, run on the watchdog's own goroutine: a stalled owner (a Close
			// behind a hung sync) must not stop the watchdog.
			if d := s.i.health.CheckStall(time.Now(), stall); d > 0 {
				s.i.tel.CommitStalled(d)
			}
		})
	case *storeWriteFailed:
		if s.recovering || m.at.Before(s.recovered) {
			return
		}
		s.recovering, s.attempt = true, 0
		minGap := time.Duration(s.i.cfg.Store.ReopenMinMS) * time.Millisecond
		s.after(ctx, max(time.Until(s.lastReopen.Add(minGap)), 0))
	case storeRecover:
		s.recover(ctx)
	case *actor.Stopping, *actor.Restarting:
		if s.tasks != nil {
			s.tasks.Stop()
			s.tasks = nil
		}
		s.close()
	}
}

func (s *storeOwner) open() (*store.DB, error) {
	cfg := s.i.cfg
	start := time.Now()
	db, err := store.Open(store.Options{Dir: cfg.StoreDir(), Log: s.i.log, Faults: s.i.opts.Faults,
		DedupeMaxEntries: cfg.Dedupe.MaxEntries, DedupeMaxEntriesPerTenant: cfg.Dedupe.MaxEntriesPerTenant,
		DedupeMaxEntriesPerSource:  cfg.Dedupe.MaxEntriesPerSource,
		BackgroundWriteBytesPerSec: int64(cfg.Store.BackgroundWriteMBPerSec) << 20,
		DeleteBytesPerSec:          int64(cfg.Store.DeleteMBPerSec) << 20,
		CommitThreadNice:           cfg.Store.CommitThreadNice,
		OnCommitWait:               s.i.tel.CommitLockWait,
		OnSyncWrite:                s.i.tel.SyncWrite})
	if err != nil {
		return nil, err
	}
	s.i.log.Info().Str("dir", cfg.StoreDir()).Uint64("next_seq", db.NextSeq()).
		Dur("open", time.Since(start)).Msg("store open")
	return db, nil
}

// recover reopens the store and probes it; on failure it schedules the next try. A store
// that took a commit since the last try is writable already and is left open.
func (s *storeOwner) recover(ctx actor.Context) {
	if s.i.db.Load() != nil && s.i.health.StoreUnavailable(time.Now()) == 0 {
		s.recovering, s.attempt, s.recovered = false, 0, time.Now()
		return
	}
	s.close()
	s.lastReopen = time.Now()
	db, err := s.open()
	s.i.tel.StoreReopened(err)
	if err != nil {
		s.i.log.Error().Err(err).Int("attempt", s.attempt).Msg("store reopen failed; ingest answers 503 store_unavailable")
		s.retry(ctx)
		return
	}
	s.i.db.Store(db)
	s.i.health.SetStoreOpen(true)
	if err := db.Probe(); err != nil {
		s.i.health.WriteFailed(time.Now())
		s.i.log.Error().Err(err).Int("attempt", s.attempt).Msg("store reopened but refuses writes; ingest answers 503 store_unavailable")
		s.retry(ctx)
		return
	}
	s.i.health.WriteSucceeded()
	s.recovering, s.attempt, s.recovered = false, 0, time.Now()
	s.i.log.Info().Msg("store writable again after a failed write")
}

// retry schedules the next reopen: reopen_min_ms doubling to reopen_max_ms, with ±20 % jitter.
func (s *storeOwner) retry(ctx actor.Context) {
	lo := time.Duration(s.i.cfg.Store.ReopenMinMS) * time.Millisecond
	hi := time.Duration(s.i.cfg.Store.ReopenMaxMS) * time.Millisecond
	d := lo << min(s.attempt, 16)
	if d > hi || d <= 0 {
		d = hi
	}
	s.attempt++
	d += time.Duration((rand.Float64()*0.4 - 0.2) * float64(d))
	s.after(ctx, d)
}

// after sends storeRecover to the owner in d, unless it stops first.
func (s *storeOwner) after(ctx actor.Context, d time.Duration) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.tasks.Go(func(stop <-chan struct{}) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			root.Send(self, storeRecover{})
		case <-stop:
		}
	})
}

func (s *storeOwner) close() {
	db := s.i.db.Swap(nil)
	s.i.health.SetStoreOpen(false)
	if db == nil {
		return
	}
	if err := db.Close(); err != nil {
		s.i.log.Error().Err(err).Msg("store close")
	}
}
