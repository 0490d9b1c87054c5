package store

import (
	"errors"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// NewDedupeSweeperProps returns the props of the dedupe sweeper: every interval it deletes up to batch expired
// dedupe keys with SweepDedupe, and sweeps again at once while a sweep fills its batch, so a backlog drains
// without waiting for the next tick while the mailbox stays open to a Stop between sweeps. Keys are expired
// here, never inside the writer (seed, Ingest row). db returns the open store, or nil while it is closed (the
// tick is then skipped). A ticker goroutine feeds the actor; Stopping and Restarting stop it and wait for it,
// and a restarted sweeper starts its own.
func NewDedupeSweeperProps(db func() *DB, interval time.Duration, batch int) *actor.Props {
	if interval <= 0 {
		interval = time.Minute
	}
	if batch <= 0 {
		batch = 1000
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &dedupeSweeper{db: db, interval: interval, batch: batch}
	})
}

type dedupeSweeper struct {
	db       func() *DB
	interval time.Duration
	batch    int

	stop chan struct{}
	wg   sync.WaitGroup
}

// dedupeSweepTick asks the sweeper for one sweep.
type dedupeSweepTick struct{}

func (s *dedupeSweeper) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		s.stop = make(chan struct{})
		self, root, stop := ctx.Self(), ctx.ActorSystem().Root, s.stop
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(s.interval)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					root.Send(self, dedupeSweepTick{})
				case <-stop:
					return
				}
			}
		}()
	case dedupeSweepTick:
		if s.sweep() {
			ctx.Send(ctx.Self(), dedupeSweepTick{})
		}
	case *actor.Stopping, *actor.Restarting:
		if s.stop != nil {
			close(s.stop)
			s.stop = nil
			s.wg.Wait()
		}
	}
}

// sweep runs one SweepDedupe; true when it filled its batch (more may be due).
func (s *dedupeSweeper) sweep() bool {
	db := s.db()
	if db == nil {
		return false
	}
	visited, deleted, err := db.sweepDedupe(time.Now(), s.batch)
	switch {
	case errors.Is(err, ErrClosed):
		return false
	case err != nil:
		db.log.Error().Err(err).Msg("dedupe sweep failed")
		return false
	case deleted > 0:
		db.log.Debug().Int("deleted", deleted).Int("expiry_keys", visited).Msg("dedupe keys swept")
	}
	return visited >= s.batch
}
