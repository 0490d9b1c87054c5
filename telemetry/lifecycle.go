package telemetry

import "github.com/prometheus/client_golang/prometheus"

// LifecycleMetrics are the lifecycle publisher's collectors (inventory H.2).
type LifecycleMetrics struct {
	Published *prometheus.CounterVec // sink: the sink's index in lifecycle.sinks
	Failed    *prometheus.CounterVec // reason: transient (retried) | permanent (given up for that sink)
	Lag       prometheus.Gauge
}

func newLifecycleMetrics(reg *prometheus.Registry, l prometheus.Labels) *LifecycleMetrics {
	m := &LifecycleMetrics{
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_lifecycle_published_total",
			Help: "Lifecycle events a sink confirmed, by sink (its index in lifecycle.sinks).", ConstLabels: l},
			[]string{"sink"}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_lifecycle_failed_total",
			Help:        "Lifecycle deliveries that failed, by reason: transient (retried), permanent (lost for that sink).",
			ConstLabels: l}, []string{"reason"}),
		Lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ankusa_lifecycle_lag",
			Help:        "Flagged audit rows past the lifecycle cursor, not yet confirmed by every sink (up to 1000).",
			ConstLabels: l}),
	}
	reg.MustRegister(m.Published, m.Failed, m.Lag)
	return m
}

// LifecyclePublished records one event confirmed by sink.
func (t *Telemetry) LifecyclePublished(sink string) {
	t.Metrics.Lifecycle.Published.WithLabelValues(sink).Inc()
}

// LifecycleFailed records one failed delivery (reason transient or permanent).
func (t *Telemetry) LifecycleFailed(reason string) {
	t.Metrics.Lifecycle.Failed.WithLabelValues(reason).Inc()
}

// LifecycleLag sets the number of flagged rows not yet published.
func (t *Telemetry) LifecycleLag(n int) { t.Metrics.Lifecycle.Lag.Set(float64(n)) }
