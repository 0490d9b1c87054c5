package telemetry

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Backup run results, the values of ankusa_backup_runs_total{result}.
const (
	BackupOK      = "ok"      // every target took the backup
	BackupPartial = "partial" // the primary took it, the secondary did not
	BackupError   = "error"   // the primary did not take it
	BackupForeign = "foreign_backup"
	// BackupPrefixShared: another node running this same store moved LATEST (a restored copy beside its original).
	BackupPrefixShared = "prefix_shared"
)

// BackupMetrics are the backup runner's collectors.
type BackupMetrics struct {
	Runs         *prometheus.CounterVec // result
	Failures     prometheus.Counter
	VerifyFailed *prometheus.CounterVec // target: primary|secondary
	// last is when the newest backup the primary holds was taken (unix ns); until one is known, when the
	// instance started, since nothing it took since is in any backup.
	last atomic.Int64

	reg     *prometheus.Registry
	age     prometheus.GaugeFunc
	ageOnce sync.Once
}

func newBackupMetrics(reg *prometheus.Registry, l prometheus.Labels) *BackupMetrics {
	m := &BackupMetrics{
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_backup_runs_total",
			Help: "Backup runs, by result: ok, partial (the secondary missed it), error, foreign_backup, prefix_shared.", ConstLabels: l},
			[]string{"result"}),
		Failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "ankusa_backup_failures_total",
			Help: "Backup runs that did not reach every target.", ConstLabels: l}),
		VerifyFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_backup_verify_failed_total",
			Help: "Read-back verifications of the latest backup that failed (signature, size or sha256), by target.", ConstLabels: l},
			[]string{"target"}),
	}
	m.last.Store(time.Now().UnixNano())
	m.age = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ankusa_backup_age_seconds",
		Help: "Seconds since the newest backup the primary holds was taken: the hooks a lost host would take with it.", ConstLabels: l},
		func() float64 { return time.Since(time.Unix(0, m.last.Load())).Seconds() })
	m.reg = reg
	reg.MustRegister(m.Runs, m.Failures, m.VerifyFailed)
	return m
}

// BackupEnabled exposes ankusa_backup_age_seconds. Only a node that takes backups has an age to report: on
// one without, the series would grow forever and page for a backup nobody configured.
func (t *Telemetry) BackupEnabled() {
	m := t.Metrics.Backup
	m.ageOnce.Do(func() { m.reg.MustRegister(m.age) })
}

// BackupRun is one backup attempt's outcome.
type BackupRun struct {
	Result   string // one of the Backup* results
	ID       string // the backup id, when the primary took it
	TakenAt  time.Time
	Duration time.Duration
	Files    int
	Bytes    int64
	Err      error // why it failed, or which target missed it
}

// Backup records one backup attempt.
func (t *Telemetry) Backup(r BackupRun) {
	m := t.Metrics.Backup
	m.Runs.WithLabelValues(r.Result).Inc()
	if r.Result == BackupOK || r.Result == BackupPartial {
		m.last.Store(r.TakenAt.UnixNano())
	}
	switch r.Result {
	case BackupOK:
		t.Log.Debug().Str("backup", r.ID).Dur("duration", r.Duration).Int("files", r.Files).Int64("bytes", r.Bytes).Msg("backup taken")
	case BackupPartial:
		m.Failures.Inc()
		t.Log.Error().Err(r.Err).Str("backup", r.ID).Msg("backup reached the primary but not the secondary")
	default:
		m.Failures.Inc()
		t.Log.Error().Err(r.Err).Str("result", r.Result).Dur("duration", r.Duration).Msg("backup failed")
	}
}

// BackupKnown records the newest backup found at the primary when the runner starts (its creation time).
func (t *Telemetry) BackupKnown(takenAt time.Time) { t.Metrics.Backup.last.Store(takenAt.UnixNano()) }

// BackupAge is how old the newest backup is (what ankusa_backup_age_seconds reports).
func (t *Telemetry) BackupAge(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, t.Metrics.Backup.last.Load()))
}

// BackupVerifyFailed records a read-back of target's latest backup that failed.
func (t *Telemetry) BackupVerifyFailed(target string, err error) {
	t.Metrics.Backup.VerifyFailed.WithLabelValues(target).Inc()
	t.Log.Error().Err(err).Str("target", target).Msg("backup verify failed: the latest backup cannot be trusted for a restore")
}
