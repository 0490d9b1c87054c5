package instance

import (
	"time"

	"github.com/ankusa-go/ankusa/intake"
	"github.com/ankusa-go/ankusa/store"
)

// prepareIntake builds the intake log client and the dual committer (wal.type dual). The client does not
// connect here: recovery, after the store opened, is the first to reach the brokers.
func (i *Instance) prepareIntake() error {
	cfg := i.cfg
	in := cfg.Intake
	log := i.log.With().Str("component", "intake").Str("topic", in.Topic).Logger()
	l, err := intake.NewLog(intake.LogOptions{
		Brokers: in.Brokers, Topic: in.Topic, Node: cfg.IntakeNodeID(),
		PublishTimeout: time.Duration(in.PublishTimeoutMS) * time.Millisecond,
		MaxRecordBytes: in.MaxRecordBytes, Log: log,
	})
	if err != nil {
		return err
	}
	i.ilog = l
	i.dual = intake.New(intake.Options{
		DB: i.db.Load,
		Commit: func(recs []*store.Record, x store.CommitExtra) (uint64, error) {
			db := i.db.Load()
			if db == nil {
				return 0, store.ErrClosed
			}
			i.health.CommitStarted(time.Now())
			defer i.health.CommitEnded()
			return db.CommitHooksWith(recs, x)
		},
		Log: l, Reader: l, Node: cfg.IntakeNodeID(), Breaker: in.BreakerFailures, MaxInflight: in.MaxInflight,
		ReconcileInterval: time.Duration(in.ReconcileIntervalMS) * time.Millisecond,
		Tel:               i.tel, Logger: log,
	})
	i.log.Info().Strs("brokers", in.Brokers).Str("topic", in.Topic).Str("intake_node_id", cfg.IntakeNodeID()).
		Int("breaker_failures", in.BreakerFailures).Msg("intake log enabled")
	return nil
}

// committer is what the writer commits through: the store itself, or under wal.type dual the two-half
// committer.
func (i *Instance) committer() store.Committer {
	if i.dual != nil {
		return i.dual
	}
	return dbRef{i}
}

// Intake is the dual committer (nil unless wal.type dual); tests read its pending set.
func (i *Instance) Intake() *intake.Dual { return i.dual }
