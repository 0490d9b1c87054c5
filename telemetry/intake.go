package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// IntakeMetrics are the intake log's series (wal.type dual).
type IntakeMetrics struct {
	Ready              prometheus.Gauge
	Failures           *prometheus.CounterVec // class
	PublishDuration    *prometheus.HistogramVec
	PendingRecords     prometheus.Gauge
	ReconcileOldestAge prometheus.Gauge
}

func newIntakeMetrics(reg *prometheus.Registry, l prometheus.Labels) *IntakeMetrics {
	m := &IntakeMetrics{
		Ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ankusa_intake_ready", Help: "1 while the intake log takes publishes (breaker closed, boot recovery done), else 0.", ConstLabels: l,
		}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ankusa_intake_failures_total", Help: "Intake log failures, by class (publish, breaker_open, local_write, reconcile, recovery).", ConstLabels: l,
		}, []string{"class"}),
		PublishDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ankusa_intake_publish_duration_seconds", Help: "Duration of one intake publish, from send to confirm (acks=all), by outcome (ok|error).", ConstLabels: l, Buckets: latencyBuckets,
		}, []string{"outcome"}),
		PendingRecords: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ankusa_intake_pending_records", Help: "Hooks held in the pending set: one half persisted, the other not yet confirmed.", ConstLabels: l,
		}),
		ReconcileOldestAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ankusa_intake_reconcile_oldest_age_seconds", Help: "Age of the oldest hook the reconciler has not completed yet; 0 when none.", ConstLabels: l,
		}),
	}
	reg.MustRegister(m.Ready, m.Failures, m.PublishDuration, m.PendingRecords, m.ReconcileOldestAge)
	return m
}

// IntakePublished records one intake publish and its outcome.
func (t *Telemetry) IntakePublished(d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
		t.Metrics.Intake.Failures.WithLabelValues("publish").Inc()
	}
	t.Metrics.Intake.PublishDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

// IntakeFailure counts one intake failure of class (breaker_open, local_write, reconcile, recovery).
func (t *Telemetry) IntakeFailure(class string) {
	t.Metrics.Intake.Failures.WithLabelValues(class).Inc()
}

// IntakeReady sets ankusa_intake_ready.
func (t *Telemetry) IntakeReady(ok bool) {
	v := 0.0
	if ok {
		v = 1
	}
	t.Metrics.Intake.Ready.Set(v)
}

// IntakePending sets the pending set's size and the age of its oldest hook.
func (t *Telemetry) IntakePending(n int, oldest time.Duration) {
	t.Metrics.Intake.PendingRecords.Set(float64(n))
	t.Metrics.Intake.ReconcileOldestAge.Set(oldest.Seconds())
}
