package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StorageMetrics are the archive compactor's collectors.
type StorageMetrics struct {
	CompactSegments  prometheus.Counter
	CompactRecords   prometheus.Counter
	CompactBytes     prometheus.Counter
	CompactDuration  prometheus.Histogram
	CompactFailures  *prometheus.CounterVec // stage
	RetentionDeleted prometheus.Counter
}

// compactBuckets span a small segment on local disk to a 16 MiB one to a slow bucket.
var compactBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newStorageMetrics(reg *prometheus.Registry, l prometheus.Labels) *StorageMetrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: l})
	}
	m := &StorageMetrics{
		CompactSegments: c("ankusa_compact_segments_total", "Archive segments written and catalogued."),
		CompactRecords:  c("ankusa_compact_records_total", "Hooks written into catalogued archive segments."),
		CompactBytes:    c("ankusa_compact_bytes_total", "Bytes of catalogued archive segment objects."),
		CompactDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ankusa_compact_duration_seconds",
			Help: "One compaction: reading obligations, writing segment, index and manifest, cataloguing.", ConstLabels: l,
			Buckets: compactBuckets}),
		CompactFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ankusa_compact_failures_total",
			Help:        "Failed compactions and retention sweeps, by stage (read, put_segment, put_index, manifest, catalogue, retention).",
			ConstLabels: l}, []string{"stage"}),
		RetentionDeleted: c("ankusa_compact_retention_deleted_total", "Archive segments deleted by archive.retention_days."),
	}
	reg.MustRegister(m.CompactSegments, m.CompactRecords, m.CompactBytes, m.CompactDuration, m.CompactFailures,
		m.RetentionDeleted)
	return m
}

// CompactEvent is one segment written and catalogued.
type CompactEvent struct {
	Key       string
	FirstSeq  uint64
	LastSeq   uint64
	Records   int
	Bytes     int64
	Reclaimed int
	Duration  time.Duration
}

// Compacted records one segment written and catalogued.
func (t *Telemetry) Compacted(ev CompactEvent) {
	m := t.Metrics.Storage
	m.CompactSegments.Inc()
	m.CompactRecords.Add(float64(ev.Records))
	m.CompactBytes.Add(float64(ev.Bytes))
	m.CompactDuration.Observe(ev.Duration.Seconds())
	t.Log.Debug().Str("key", ev.Key).Uint64("first_seq", ev.FirstSeq).Uint64("last_seq", ev.LastSeq).
		Int("records", ev.Records).Int64("bytes", ev.Bytes).Int("reclaimed", ev.Reclaimed).Dur("duration", ev.Duration).
		Msg("archive segment written")
}

// CompactFailed records a failed compaction or retention sweep at stage; the next try is in retryIn.
func (t *Telemetry) CompactFailed(stage string, err error, retryIn time.Duration) {
	t.Metrics.Storage.CompactFailures.WithLabelValues(stage).Inc()
	t.Log.Error().Err(err).Str("stage", stage).Dur("retry_in", retryIn).
		Msg("archive compaction failed; the same hooks are retried")
}

// RetentionDeleted records segments deleted by archive.retention_days.
func (t *Telemetry) RetentionDeleted(n int) {
	if n == 0 {
		return
	}
	t.Metrics.Storage.RetentionDeleted.Add(float64(n))
	t.Log.Info().Int("segments", n).Msg("archive segments past archive.retention_days deleted")
}

// ArchivePending reports the archive obligations waiting (sampled).
func (t *Telemetry) ArchivePending(n int64) { t.Metrics.Dispatch.QueueArchive.Set(float64(n)) }
