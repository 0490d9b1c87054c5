package lifecycle

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ankusa-go/ankusa/store"
)

// Lifecycle replay jobs (inventory F.5, kind lifecycle) re-publish the events of the flagged audit rows
// committed in a window, in commit (so revision) order and with the ids of their first delivery: a consumer
// that dedupes on id takes a replay as the redelivery it is. The publisher runs them between its live drains,
// one step per job at a time, so a long replay never holds the live events back for long. A step re-reads
// its job, so a pause or cancel takes effect at the next step; each step's progress (cursor, events
// published, done) is synced, and a job resumes after a restart from its cursor, delivering at most the
// events of the step a crash cut short twice.

// maxReplayStep bounds the events of one step; a slower rate takes smaller steps (one second's worth).
const maxReplayStep = 100

// ReplayMetrics is what the publisher reports of replay jobs (telemetry.Telemetry implements it).
type ReplayMetrics interface {
	ReplayMoved(kind string, n int)
}

// replayStep runs one step of every running lifecycle job; more reports a job with work left.
func (p *Publisher) replayStep(db *store.DB, stop <-chan struct{}) (more bool, err error) {
	jobs, err := db.ReplayJobs()
	if err != nil {
		return false, err
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Kind != store.ReplayKindLifecycle || j.State != "running" {
			continue
		}
		left, err := p.replayJob(db, j, stop)
		if err != nil {
			return more, fmt.Errorf("lifecycle replay %s: %w", uuid.UUID(j.ID), err)
		}
		more = more || left
	}
	return more, nil
}

// replayJob publishes the next step of job j's window and records it; left reports the job still running.
func (p *Publisher) replayJob(db *store.DB, j *store.ReplayJob, stop <-chan struct{}) (left bool, err error) {
	rate := j.Rate
	if rate <= 0 {
		rate = store.DefaultReplayRate
	}
	step := max(1, min(maxReplayStep, int(rate)))
	cur := store.LifecycleReplayCursor(j)
	rows, err := db.ListAudit(store.AuditFilter{After: cur, Flagged: true, Tenant: j.Tenant}, step)
	if err != nil {
		return false, err
	}
	done := len(rows) < step // the trail ends within this step, unless a pending row stops it first
	blocked := false
	sent := 0
	start := time.Now()
	for _, r := range rows {
		if r.At >= j.Until {
			done = true
			break
		}
		if r.Status == store.AuditPending {
			// Its outcome is not known yet (the boot settles it): wait, as the live drain does.
			done, blocked = false, true
			break
		}
		if r.At >= j.Since {
			published, err := p.publish(db, r, stop)
			if err != nil {
				return false, err
			}
			if published {
				sent++
				// Paced at the job's rate: the k-th event of the step goes no sooner than k/rate after its start.
				if wait := time.Until(start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))); wait > 0 {
					select {
					case <-stop:
						return false, errStopped
					case <-time.After(wait):
					}
				}
			}
		}
		cur = r.Seq
	}
	rec, err := db.AdvanceReplayJob(j.ID, cur, int64(sent), done)
	if err != nil {
		return false, fmt.Errorf("record the step at audit seq %d: %w", cur, err)
	}
	if sent > 0 && p.Replays != nil {
		p.Replays.ReplayMoved(store.ReplayKindLifecycle, sent)
	}
	if rec.State == "done" {
		p.Log.Info().Str("replay_id", uuid.UUID(j.ID).String()).Int64("events", rec.Moved).Msg("lifecycle replay done")
	}
	return rec.State == "running" && !done && !blocked, nil
}
