package telemetry

import "github.com/prometheus/client_golang/prometheus"

// ClaimCheckMetrics are the claim check's collectors (inventory H.2).
type ClaimCheckMetrics struct {
	Operations *prometheus.CounterVec // result: ok|error — check-ins
	Redeems    *prometheus.CounterVec // result: claimcheck's Result* values
	Failures   *prometheus.CounterVec // op: check_in|redeem|sweep
	Swept      prometheus.Counter
}

func newClaimCheckMetrics(reg *prometheus.Registry, l prometheus.Labels) *ClaimCheckMetrics {
	m := &ClaimCheckMetrics{
		Operations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_claim_check_operations_total",
			Help: "Check-ins of a batch of bodies into packs, by result: ok, error.", ConstLabels: l}, []string{"result"}),
		Redeems: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_claim_check_redeems_total",
			Help: "Claim gateway reads, by result: ok, not_found, invalid, unauthorized, forbidden, store_error.", ConstLabels: l},
			[]string{"result"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_claim_check_failures_total",
			Help: "Claim check operations the store failed, by op: check_in, redeem (answered 503), sweep.", ConstLabels: l},
			[]string{"op"}),
		Swept: prometheus.NewCounter(prometheus.CounterOpts{Name: "ankusa_claim_check_swept_packs_total",
			Help: "Claim packs deleted by the retention sweep.", ConstLabels: l}),
	}
	reg.MustRegister(m.Operations, m.Redeems, m.Failures, m.Swept)
	return m
}

// ClaimRedeemed records one gateway read (result: ok, not_found, invalid, unauthorized, forbidden,
// store_error); a store error also counts as a redeem failure.
func (t *Telemetry) ClaimRedeemed(result string) {
	m := t.Metrics.ClaimCheck
	m.Redeems.WithLabelValues(result).Inc()
	if result == "store_error" {
		m.Failures.WithLabelValues("redeem").Inc()
	}
}

// ClaimCheckedIn records one check-in of a batch of bodies.
func (t *Telemetry) ClaimCheckedIn(err error) {
	m := t.Metrics.ClaimCheck
	if err != nil {
		m.Operations.WithLabelValues("error").Inc()
		m.Failures.WithLabelValues("check_in").Inc()
		return
	}
	m.Operations.WithLabelValues("ok").Inc()
}

// ClaimSwept records one retention sweep: deleted packs, and whether it failed part way.
func (t *Telemetry) ClaimSwept(deleted int, err error) {
	m := t.Metrics.ClaimCheck
	m.Swept.Add(float64(deleted))
	if err != nil {
		m.Failures.WithLabelValues("sweep").Inc()
	}
}
