package store

import (
	"errors"
	"sync/atomic"
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

// NewAuditSweeperProps returns the props of the audit trail's sweeper. Its first incarnation settles the rows
// a crash left pending (SettleAudit with settle, rows written before the props were made); every interval it
// deletes the rows older than retention (PruneAudit; holdCursor keeps those the lifecycle publisher has not
// passed). settle nil settles every pending row "interrupted".
func NewAuditSweeperProps(db func() *DB, retention, interval time.Duration, holdCursor bool, settle SubjectState) *actor.Props {
	if interval <= 0 {
		interval = time.Minute
	}
	if settle == nil {
		settle = func(AuditRow) ([]byte, bool, error) { return nil, false, nil }
	}
	bootAt := time.Now().UnixMilli()
	var settled atomic.Bool
	return actor.PropsFromProducer(func() actor.Actor {
		return &sweeper{db: db, interval: interval, sweep: func(db *DB) bool {
			if !settled.Load() {
				rows, err := db.SettleAudit(settle, bootAt)
				for _, r := range rows {
					db.log.Warn().Uint64("audit_seq", r.Seq).Str("subject", r.Subject).Str("status", r.Status).
						Msg("audit row left pending by a crash settled")
				}
				if err != nil {
					db.log.Error().Err(err).Msg("cannot settle pending audit rows")
				} else {
					settled.Store(true)
				}
			}
			n, blocked, err := db.PruneAudit(time.Now().Add(-retention).UnixMilli(), holdCursor)
			switch {
			case errors.Is(err, ErrClosed):
			case err != nil:
				db.log.Error().Err(err).Msg("audit retention failed")
			case n > 0 || blocked > 0:
				db.log.Info().Int("deleted", n).Int("blocked_by_cursor", blocked).Msg("expired audit rows deleted")
			}
			return false
		}, first: true}
	})
}

// sweeper runs sweep every interval, and again at once while sweep reports more is due.
type sweeper struct {
	db       func() *DB
	interval time.Duration
	sweep    func(*DB) bool
	first    bool // sweep once at start, not only after the first interval

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
		if s.first {
			// Once the store is open (the store owner opens it beside this actor).
			db := s.db
			s.tasks.Go(func(stop <-chan struct{}) {
				t := time.NewTicker(50 * time.Millisecond)
				defer t.Stop()
				for db() == nil {
					select {
					case <-stop:
						return
					case <-t.C:
					}
				}
				root.Send(self, dedupeSweepTick{})
			})
		}
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
