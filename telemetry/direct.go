package telemetry

import "time"

// DirectPublish records one sink's publish inside an ingest request (wal.type none) on
// the delivery series it shares with dispatch: ankusa_dispatch_deliveries_total{result,sink}
// and ankusa_dispatch_attempt_duration_seconds{sink,result} with result ok, error or
// timeout, and ankusa_delivery_latency_seconds{sink,result} with ok or error ("direct
// mode error: the sink refused"), age measured from the hook's received_at.
func (t *Telemetry) DirectPublish(sink, result string, d, age time.Duration) {
	m := t.Metrics.Dispatch
	m.Deliveries.WithLabelValues(result, sink).Inc()
	m.AttemptDuration.WithLabelValues(sink, result).Observe(d.Seconds())
	settled := result
	if result == ResultTimeout {
		settled = ResultError
	}
	m.DeliveryLatency.WithLabelValues(sink, settled).Observe(age.Seconds())
}
