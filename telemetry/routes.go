package telemetry

import "github.com/prometheus/client_golang/prometheus"

// RoutesMetrics are the route guard's collectors (inventory H.1 routes.match/reject). The labels are bounded:
// decision allow|reject, reason matched|no_route|method|ip_denied; never a path or a route id, since an
// unauthenticated caller chooses the path.
type RoutesMetrics struct {
	Decisions *prometheus.CounterVec
	Size      prometheus.Gauge
	// byReason holds the counters bound at start, so a decision on the hot path allocates nothing.
	byReason [len(routeReasons)]prometheus.Counter
}

var routeReasons = [...]string{"matched", "no_route", "method", "ip_denied"}

func newRoutesMetrics(reg *prometheus.Registry, l prometheus.Labels) *RoutesMetrics {
	m := &RoutesMetrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_routes_decisions_total",
			Help:        "Route guard decisions (routes.enabled), by decision (allow|reject) and reason (matched|no_route|method|ip_denied).",
			ConstLabels: l}, []string{"decision", "reason"}),
		Size: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ankusa_routes",
			Help: "Routes in the route table, enabled or not.", ConstLabels: l}),
	}
	for i, r := range routeReasons {
		d := "reject"
		if r == "matched" {
			d = "allow"
		}
		m.byReason[i] = m.Decisions.WithLabelValues(d, r)
	}
	reg.MustRegister(m.Decisions, m.Size)
	return m
}

// RouteDecision counts one decision of the guard by its reason (a reason outside the four is not counted).
func (t *Telemetry) RouteDecision(reason string) {
	for i, r := range routeReasons {
		if r == reason {
			t.Metrics.Routes.byReason[i].Inc()
			return
		}
	}
}

// Routes sets the route table's size.
func (t *Telemetry) Routes(n int) { t.Metrics.Routes.Size.Set(float64(n)) }
