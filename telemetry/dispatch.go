package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Delivery results, the values of the dispatch metrics' result label.
const (
	ResultOK      = "ok"
	ResultError   = "error"
	ResultTimeout = "timeout"
	ResultDLQ     = "dlq"
	ResultRetry   = "retry"
	ResultParked  = "parked"
)

// DispatchMetrics are the delivery side's collectors.
type DispatchMetrics struct {
	Deliveries         *prometheus.CounterVec   // result, sink
	DeadLettered       *prometheus.CounterVec   // source_id, sink
	AttemptDuration    *prometheus.HistogramVec // sink, result
	DeliveryLatency    *prometheus.HistogramVec // sink, result
	BreakerTransitions *prometheus.CounterVec   // sink, state
	BreakersOpen       prometheus.Gauge
	Running            prometheus.Gauge
	Claimed            prometheus.Gauge
	ClaimedBytes       prometheus.Gauge
	FreshClaims        prometheus.Counter
	ActiveTenants      prometheus.Gauge
	LanesBlocked       prometheus.Gauge
	TenantInflight     *prometheus.GaugeVec // tenant (top 100)
	QueuePending       prometheus.Gauge
	QueueScheduled     prometheus.Gauge
	QueueInflight      prometheus.Gauge
	QueueDead          prometheus.Gauge
	QueueArchive       prometheus.Gauge
	OldestDueAge       prometheus.Gauge
	ReplayMoved        *prometheus.CounterVec // kind
	ReplayThrottled    *prometheus.CounterVec // reason
}

// deliveryBuckets reach past the SLO's 5 s to the retry horizon's first minutes.
var deliveryBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

func newDispatchMetrics(reg *prometheus.Registry, l prometheus.Labels) *DispatchMetrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: l})
	}
	m := &DispatchMetrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_dispatch_deliveries_total",
			Help: "Delivery attempts settled, by result and sink type.", ConstLabels: l}, []string{"result", "sink"}),
		DeadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_dispatch_dead_lettered_total",
			Help: "Delivery rows dead-lettered, by source and sink type.", ConstLabels: l}, []string{"source_id", "sink"}),
		AttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ankusa_dispatch_attempt_duration_seconds",
			Help: "One sink attempt, retried or not.", ConstLabels: l, Buckets: deliveryBuckets}, []string{"sink", "result"}),
		DeliveryLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ankusa_delivery_latency_seconds",
			Help: "Age of a hook when its delivery settled, from received_at.", ConstLabels: l, Buckets: deliveryBuckets}, []string{"sink", "result"}),
		BreakerTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_dispatch_breaker_transitions_total",
			Help: "Circuit breaker transitions, by sink type and new state.", ConstLabels: l}, []string{"sink", "state"}),
		BreakersOpen:   g("ankusa_dispatch_breakers_open", "Sink keys whose breaker is open."),
		Running:        g("ankusa_dispatch_running", "Delivery attempts running."),
		Claimed:        g("ankusa_dispatch_claimed", "Delivery rows claimed by the scheduler."),
		ClaimedBytes:   g("ankusa_dispatch_claimed_bytes", "Stored size of the claimed rows' hooks."),
		ActiveTenants:  g("ankusa_dispatch_active_tenants", "Tenants with deliveries due."),
		LanesBlocked:   g("ankusa_dispatch_lanes_blocked", "Ordered lanes waiting on a retry of their head."),
		QueuePending:   g("ankusa_queue_pending", "First delivery attempts waiting."),
		QueueScheduled: g("ankusa_queue_scheduled", "Retries and parked deliveries waiting."),
		QueueInflight:  g("ankusa_queue_inflight", "Deliveries claimed."),
		QueueDead:      g("ankusa_queue_dead", "Dead-lettered deliveries (the DLQ)."),
		QueueArchive:   g("ankusa_queue_archive_pending", "Archive obligations waiting."),
		OldestDueAge:   g("ankusa_queue_oldest_due_age_seconds", "Age of the oldest due delivery: the backlog's age."),
		TenantInflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ankusa_dispatch_tenant_inflight",
			Help: "Claimed rows of the 100 tenants holding the most.", ConstLabels: l}, []string{"tenant"}),
		ReplayMoved: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_replay_moved_total",
			Help: "Rows moved back to due by replay jobs.", ConstLabels: l}, []string{"kind"}),
		ReplayThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_replay_throttled_total",
			Help: "Replay steps held back, by reason.", ConstLabels: l}, []string{"reason"}),
		FreshClaims: prometheus.NewCounter(prometheus.CounterOpts{Name: "ankusa_dispatch_fresh_claims_total",
			Help: "Delivery rows claimed by the commit that wrote them, without a scan.", ConstLabels: l}),
	}
	reg.MustRegister(m.Deliveries, m.DeadLettered, m.AttemptDuration, m.DeliveryLatency, m.BreakerTransitions,
		m.BreakersOpen, m.Running, m.Claimed, m.ClaimedBytes, m.FreshClaims, m.ActiveTenants, m.LanesBlocked, m.TenantInflight,
		m.QueuePending, m.QueueScheduled, m.QueueInflight, m.QueueDead, m.QueueArchive, m.OldestDueAge,
		m.ReplayMoved, m.ReplayThrottled)
	return m
}

// Attempt records one delivery attempt and, when it settled the row (ok or dead-lettered),
// the hook's age. A replayed delivery is not sampled for latency: its age is the replay's.
func (t *Telemetry) Attempt(sink, result string, d time.Duration, settled bool, age time.Duration, replay bool) {
	m := t.Metrics.Dispatch
	m.Deliveries.WithLabelValues(result, sink).Inc()
	attemptResult := result
	switch result {
	case ResultRetry, ResultDLQ:
		attemptResult = ResultError
	}
	m.AttemptDuration.WithLabelValues(sink, attemptResult).Observe(d.Seconds())
	if settled && !replay {
		m.DeliveryLatency.WithLabelValues(sink, result).Observe(age.Seconds())
	}
}

// DeadLettered records a row given up on, with the reason in the log.
func (t *Telemetry) DeadLettered(source, sink, reason string) {
	t.Metrics.Dispatch.DeadLettered.WithLabelValues(source, sink).Inc()
	t.Log.Warn().Str("source_id", source).Str("sink", sink).Str("reason", reason).Msg("delivery dead-lettered")
}

// Breaker records a breaker transition of a sink key.
func (t *Telemetry) Breaker(sink, tenant, source, state string) {
	t.Metrics.Dispatch.BreakerTransitions.WithLabelValues(sink, state).Inc()
	ev := t.Log.Info()
	if state == "open" {
		ev = t.Log.Warn()
	}
	ev.Str("sink", sink).Str("tenant", tenant).Str("source_id", source).Str("state", state).Msg("circuit breaker")
}

// Parked records a claimed row put back because its sink's breaker is open (no attempt
// was spent on it).
func (t *Telemetry) Parked(sink string) {
	t.Metrics.Dispatch.Deliveries.WithLabelValues(ResultParked, sink).Inc()
}

// FreshClaimed records n delivery rows the scheduler received from the commit that wrote them.
func (t *Telemetry) FreshClaimed(n int) {
	t.Metrics.Dispatch.FreshClaims.Add(float64(n))
}

// ReplayThrottled records a replay step held back: "lag" (dispatch is behind) or "rate".
func (t *Telemetry) ReplayThrottled(reason string) {
	t.Metrics.Dispatch.ReplayThrottled.WithLabelValues(reason).Inc()
}

// ReplayMoved records rows a replay job of kind moved back to due.
func (t *Telemetry) ReplayMoved(kind string, rows int) {
	t.Metrics.Dispatch.ReplayMoved.WithLabelValues(kind).Add(float64(rows))
}

// DispatchSample is what the scheduler reports every housekeeping tick: the store's
// counters (O(1) reads) and its own in-memory state.
type DispatchSample struct {
	Pending, Scheduled, Inflight, Dead, ArchivePending int64
	OldestDueAge                                       time.Duration // 0 when nothing is overdue
	Running, Claimed                                   int
	ClaimedBytes                                       int64
	ActiveTenants, BreakersOpen, LanesBlocked          int
	// TopTenants are the tenants holding the most claimed rows, most first; only the
	// first 100 become series.
	TopTenants []TenantClaims
}

// TenantClaims is one tenant's claimed rows.
type TenantClaims struct {
	Tenant  string
	Claimed int
}

// maxTenantSeries bounds ankusa_dispatch_tenant_inflight's series.
const maxTenantSeries = 100

// DispatchGauges reports a scheduler sample.
func (t *Telemetry) DispatchGauges(s DispatchSample) {
	m := t.Metrics.Dispatch
	m.QueuePending.Set(float64(s.Pending))
	m.QueueScheduled.Set(float64(s.Scheduled))
	m.QueueInflight.Set(float64(s.Inflight))
	m.QueueDead.Set(float64(s.Dead))
	m.QueueArchive.Set(float64(s.ArchivePending))
	m.OldestDueAge.Set(s.OldestDueAge.Seconds())
	m.Running.Set(float64(s.Running))
	m.Claimed.Set(float64(s.Claimed))
	m.ClaimedBytes.Set(float64(s.ClaimedBytes))
	m.ActiveTenants.Set(float64(s.ActiveTenants))
	m.BreakersOpen.Set(float64(s.BreakersOpen))
	m.LanesBlocked.Set(float64(s.LanesBlocked))
	m.TenantInflight.Reset()
	for _, tc := range s.TopTenants[:min(len(s.TopTenants), maxTenantSeries)] {
		m.TenantInflight.WithLabelValues(tc.Tenant).Set(float64(tc.Claimed))
	}
}
