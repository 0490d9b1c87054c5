package telemetry

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// latencyBuckets span 1 ms to 2.5 s, the range the ack and commit SLOs are read in.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// lockWaitBuckets resolve the tens of microseconds a commit usually waits for the store's lock, and the
// milliseconds it waits behind a long claim or sweep.
var lockWaitBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .01, .1, 1}

// syncWriteBuckets resolve the hundreds of microseconds a synced write takes on a local SSD and the
// milliseconds of a stalled one.
var syncWriteBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, 1, 5}

// Metrics holds the instance's collectors. Names are written out in full where they
// are created so a grep for a series finds its definition.
type Metrics struct {
	Registry *prometheus.Registry

	IngestRequests   *prometheus.CounterVec // source_id, outcome
	IngestRefused    *prometheus.CounterVec // reason
	IngestDuration   prometheus.Histogram
	CommitDuration   prometheus.Histogram
	CommitBatchSize  prometheus.Histogram
	CommitLockWait   prometheus.Histogram
	SyncWrite        prometheus.Histogram
	CommitFailures   *prometheus.CounterVec // class
	LoadShed         prometheus.Counter
	SubtreeDown      *prometheus.CounterVec // domain
	QueueRecords     prometheus.Gauge
	QueueBytes       prometheus.Gauge
	StoreNextSeq     prometheus.Gauge
	StoreUnavailable prometheus.Gauge
	StoreReopens     *prometheus.CounterVec // result: ok|error
	StoreMemory      *prometheus.GaugeVec   // kind
	StoreTrash       prometheus.Gauge
	CommitStalls     prometheus.Counter
	// SourcesWithoutDedupe counts the configured sources with no dedupe (each also a boot warning).
	SourcesWithoutDedupe prometheus.Gauge
	// IngestPanics counts ingest requests whose handler panicked (answered 500 internal).
	IngestPanics prometheus.Counter
	// IngestBodyBytes is the body bytes being read at once, before admission.
	IngestBodyBytes prometheus.Gauge

	Dispatch *DispatchMetrics
	Backup   *BackupMetrics
	Trust    *TrustMetrics
	Storage  *StorageMetrics
	// ClaimCheck counts claim check-ins, gateway reads and retention sweeps.
	ClaimCheck *ClaimCheckMetrics
	// Intake holds the intake log's series (wal.type dual).
	Intake *IntakeMetrics
	// Lifecycle counts the lifecycle events published (lifecycle.sinks).
	Lifecycle *LifecycleMetrics
	// Routes are the route guard's decisions and table size (routes.enabled).
	Routes *RoutesMetrics
}

func newMetrics(instance string) *Metrics {
	reg := prometheus.NewRegistry()
	l := prometheus.Labels{"instance": instance}
	m := &Metrics{
		Registry: reg,
		IngestRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ankusa_ingest_requests_total", Help: "Ingest requests answered, by source and outcome.", ConstLabels: l,
		}, []string{"source_id", "outcome"}),
		IngestRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ankusa_ingest_refused_total", Help: "Requests refused before the source was known or the body read, by reason.", ConstLabels: l,
		}, []string{"reason"}),
		IngestDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ankusa_ingest_duration_seconds", Help: "Ack latency: how long one ingest request took to answer.", ConstLabels: l, Buckets: latencyBuckets,
		}),
		CommitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ankusa_wal_commit_duration_seconds", Help: "Duration of one synced group commit.", ConstLabels: l, Buckets: latencyBuckets,
		}),
		CommitLockWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ankusa_wal_commit_lock_wait_seconds", ConstLabels: l, Buckets: lockWaitBuckets,
			Help: "Time one group commit waited for the store's write lock (held by dispatch's claims and outcome groups and other counter writes) before its synced write.",
		}),
		SyncWrite: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ankusa_wal_sync_write_seconds", ConstLabels: l, Buckets: syncWriteBuckets,
			Help: "Time RocksDB took for one group commit's synced write on the store's commit thread (WAL append, sync, memtable insert), without the lock wait and the hand-offs to and from the thread.",
		}),
		CommitBatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ankusa_wal_commit_batch_size", Help: "Hooks per synced group commit.", ConstLabels: l,
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096},
		}),
		CommitFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ankusa_store_write_failures_total", Help: "Failed store writes, by class.", ConstLabels: l,
		}, []string{"class"}),
		LoadShed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ankusa_load_shed_total", Help: "Requests shed because a batcher partition was full (503 overload).", ConstLabels: l,
		}),
		SubtreeDown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ankusa_instance_subtree_down_total", Help: "Failure domains that exhausted their restart budget.", ConstLabels: l,
		}, []string{"domain"}),
		QueueRecords: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ankusa_batcher_queue_records", Help: "Records buffered or in flight in the batchers.", ConstLabels: l,
		}),
		QueueBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ankusa_batcher_queue_bytes", Help: "Body bytes buffered or in flight in the batchers.", ConstLabels: l,
		}),
		StoreNextSeq: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ankusa_store_next_seq", Help: "The next sequence number the store will assign.", ConstLabels: l,
		}),
		StoreUnavailable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ankusa_store_unavailable_seconds", Help: "How long the store has been unable to commit: seconds since the first failed write (or close) not yet followed by a successful one; 0 when writable.", ConstLabels: l,
		}),
		StoreReopens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ankusa_store_reopen_total", Help: "Store reopens after a failed write, by result (ok|error).", ConstLabels: l,
		}, []string{"result"}),
		StoreMemory: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ankusa_store_memory_bytes", Help: "The store's memory outside the Go heap as RocksDB accounts it, by kind (block_cache, block_cache_pinned, block_cache_capacity, memtables, memtables_pinned: flushed memtables a reader still holds, table_readers).", ConstLabels: l,
		}, []string{"kind"}),
		StoreTrash: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ankusa_store_trash_bytes", Help: "Obsolete WAL and table files waiting for their paced deletion (store.delete_mb_per_s); one that keeps growing means the rate is below the rate the store writes at.", ConstLabels: l,
		}),
		CommitStalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ankusa_store_commit_stalls_total", Help: "Synced writes that ran longer than store.commit_stall_ms.", ConstLabels: l,
		}),
	}
	m.SourcesWithoutDedupe = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ankusa_sources_without_dedupe", Help: "Configured sources with no dedupe key.", ConstLabels: l,
	})
	m.IngestPanics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ankusa_ingest_panics_total", Help: "Ingest requests whose handler panicked; each was answered 500 internal.", ConstLabels: l,
	})
	m.IngestBodyBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ankusa_ingest_body_bytes_reading", Help: "Body bytes reserved by requests whose body is being read, before admission.", ConstLabels: l,
	})
	reg.MustRegister(m.IngestPanics, m.IngestBodyBytes, m.SourcesWithoutDedupe, m.IngestRequests, m.IngestRefused, m.IngestDuration, m.CommitDuration, m.CommitLockWait, m.SyncWrite, m.CommitBatchSize,
		m.CommitFailures, m.LoadShed, m.SubtreeDown, m.QueueRecords, m.QueueBytes, m.StoreNextSeq, m.StoreUnavailable,
		m.StoreReopens, m.StoreMemory, m.StoreTrash, m.CommitStalls,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Dispatch = newDispatchMetrics(reg, l)
	m.Trust = newTrustMetrics(reg, l)
	m.Storage = newStorageMetrics(reg, l)
	m.Backup = newBackupMetrics(reg, l)
	m.ClaimCheck = newClaimCheckMetrics(reg, l)
	m.Intake = newIntakeMetrics(reg, l)
	m.Lifecycle = newLifecycleMetrics(reg, l)
	m.Routes = newRoutesMetrics(reg, l)
	return m
}

// Handler serves the instance's own registry in the Prometheus exposition format (the
// admin listener's GET /metrics).
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.Metrics.Registry, promhttp.HandlerOpts{})
}
