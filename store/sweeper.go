package store

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/telemetry/task"
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
		return &sweeper{db: db, interval: interval, sweep: func(db *DB) bool { return sweepDedupeOnce(db, batch) }}
	})
}

// NewQuarantineSweeperProps returns the props of the quarantine pen's sweeper: every interval it deletes up to
// batch entries older than retention with SweepQuarantine (sweeping again at once while a sweep fills its
// batch), so the pen empties of what nobody released and its byte counters follow in the same synced batches.
func NewQuarantineSweeperProps(db func() *DB, retention, interval time.Duration, batch int) *actor.Props {
	if interval <= 0 {
		interval = time.Minute
	}
	if batch <= 0 {
		batch = 1000
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &sweeper{db: db, interval: interval, sweep: func(db *DB) bool {
			n, bytes, err := db.SweepQuarantine(time.Now(), retention, batch)
			switch {
			case errors.Is(err, ErrClosed):
				return false
			case err != nil:
				db.log.Error().Err(err).Msg("quarantine sweep failed")
				return false
			case n > 0:
				db.log.Info().Int("deleted", n).Int64("bytes", bytes).Dur("retention", retention).
					Msg("expired quarantine entries deleted")
			}
			return n >= batch
		}}
	})
}

// sweeper runs sweep every interval, and again at once while sweep reports more is due.
type sweeper struct {
	db       func() *DB
	interval time.Duration
	sweep    func(*DB) bool

	tasks *task.Group // the ticker; one group per incarnation
}

// dedupeSweepTick asks a sweeper for one sweep.
type dedupeSweepTick struct{}

func (s *sweeper) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		s.tasks = &task.Group{}
		self, root := ctx.Self(), ctx.ActorSystem().Root
		s.tasks.Every(s.interval, func() { root.Send(self, dedupeSweepTick{}) })
	case dedupeSweepTick:
		if db := s.db(); db != nil && s.sweep(db) {
			ctx.Send(ctx.Self(), dedupeSweepTick{})
		}
	case *actor.Stopping, *actor.Restarting:
		if s.tasks != nil {
			s.tasks.Stop()
			s.tasks = nil
		}
	}
}

// sweepDedupeOnce runs one SweepDedupe; true when it filled its batch (more may be due).
func sweepDedupeOnce(db *DB, batch int) bool {
	visited, deleted, err := db.sweepDedupe(time.Now(), batch)
	switch {
	case errors.Is(err, ErrClosed):
		return false
	case err != nil:
		db.log.Error().Err(err).Msg("dedupe sweep failed")
		return false
	case deleted > 0:
		db.log.Debug().Int("deleted", deleted).Int("expiry_keys", visited).Msg("dedupe keys swept")
	}
	return visited >= batch
}
