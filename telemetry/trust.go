package telemetry

import "github.com/prometheus/client_golang/prometheus"

// TrustMetrics count what the edge's verification and limits refused.
type TrustMetrics struct {
	VerifyFailures *prometheus.CounterVec // source_id, provider, scheme
	WeakHash       *prometheus.CounterVec // source_id, scheme
	RateLimited    *prometheus.CounterVec // tenant_id (configured tenants only)
	QuotaRefused   *prometheus.CounterVec // source_id, quota
	// FleetDegraded is 1 while the fleet store's breaker is open and the node limits and dedupes alone.
	FleetDegraded prometheus.Gauge
	Handshakes    *prometheus.CounterVec // source_id, kind, result
}

func newTrustMetrics(reg *prometheus.Registry, l prometheus.Labels) *TrustMetrics {
	m := &TrustMetrics{
		VerifyFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_verify_failures_total",
			Help: "Requests whose verification failed, by source, provider and scheme.", ConstLabels: l},
			[]string{"source_id", "provider", "scheme"}),
		WeakHash: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_verifier_weak_hash_total",
			Help: "Requests verified with SHA-1, matched or not.", ConstLabels: l}, []string{"source_id", "scheme"}),
		RateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_rate_limit_rejected_total",
			Help: "Hooks refused by their tenant's quota (tenant_id is \"other\" for tenants not in the config).", ConstLabels: l},
			[]string{"tenant_id"}),
	}
	m.QuotaRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_quota_refused_total",
		Help: "Hooks refused because a pen or dedupe budget was full, by source and by the budget: quarantine_node, " +
			"quarantine_source, quarantine_tenant, dedupe_node, dedupe_tenant, dedupe_source.", ConstLabels: l},
		[]string{"source_id", "quota"})
	m.FleetDegraded = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ankusa_fleet_limiter_degraded",
		Help: "1 while the fleet store (rate_limits.scope or dedupe.scope fleet) is out of the path and the node " +
			"limits and dedupes alone, else 0.", ConstLabels: l})
	m.Handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_handshakes_total",
		Help: "Provider subscription handshakes answered at the edge (result answered) or refused (result refused: " +
			"the check the provider allows failed, or the value to echo was not echoable), by source and kind.", ConstLabels: l},
		[]string{"source_id", "kind", "result"})
	reg.MustRegister(m.VerifyFailures, m.WeakHash, m.RateLimited, m.QuotaRefused, m.FleetDegraded, m.Handshakes)
	return m
}

// VerifyFailed records a failed verification of a configured source.
func (t *Telemetry) VerifyFailed(source, provider, scheme string) {
	t.Metrics.Trust.VerifyFailures.WithLabelValues(source, provider, scheme).Inc()
}

// WeakHash records a request verified with SHA-1, whether or not it matched.
func (t *Telemetry) WeakHash(source, scheme string) {
	t.Metrics.Trust.WeakHash.WithLabelValues(source, scheme).Inc()
}

// RateLimited records a hook refused by its tenant's quota; label is a configured tenant
// or "other", so URL-chosen tenants cannot grow /metrics.
func (t *Telemetry) RateLimited(label string) {
	t.Metrics.Trust.RateLimited.WithLabelValues(label).Inc()
}

// QuotaRefused records a hook of a configured source refused because the budget quota (a pen or dedupe share)
// was full. source is a source id the edge resolved, never a name taken from the URL, so the series stay bounded.
func (t *Telemetry) QuotaRefused(source, quota string) {
	t.Metrics.Trust.QuotaRefused.WithLabelValues(source, quota).Inc()
}

// FleetDegraded records the fleet store's breaker opening (true) or closing.
func (t *Telemetry) FleetDegraded(degraded bool) {
	v := 0.0
	if degraded {
		v = 1
	}
	t.Metrics.Trust.FleetDegraded.Set(v)
}

// Handshake records a provider subscription handshake of a configured source: result is "answered" or
// "refused"; kind is one of config.Handshakes, so the series stay bounded.
func (t *Telemetry) Handshake(source, kind, result string) {
	t.Metrics.Trust.Handshakes.WithLabelValues(source, kind, result).Inc()
}
