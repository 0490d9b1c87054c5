package telemetry

import (
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Ingest outcomes, the values of ankusa_ingest_requests_total{outcome}.
const (
	OutcomeCommitted        = "committed"
	OutcomeDuplicate        = "duplicate"
	OutcomeOverload         = "overload"
	OutcomeStoreUnavailable = "store_unavailable"
	OutcomeDeadline         = "deadline_exceeded"
)

// Telemetry is one instance's event sink: each typed method updates the metrics and,
// where an operator needs it, the log. Methods are safe for concurrent use.
type Telemetry struct {
	Instance string
	Log      zerolog.Logger
	Metrics  *Metrics

	// ingest holds the ingest_requests children already looked up: WithLabelValues hashes both labels and takes
	// the vector's lock on every call, a third of a microsecond of every hook. Sources and outcomes are
	// configured names and a fixed set, so the map stays small; children are never deleted.
	ingestMu sync.RWMutex
	ingest   map[ingestKey]prometheus.Counter
}

type ingestKey struct{ source, outcome string }

// New builds the instance's telemetry on its own registry.
func New(instance string, log zerolog.Logger) *Telemetry {
	return &Telemetry{Instance: instance, Log: log, Metrics: newMetrics(instance)}
}

// NewLogger returns the process logger at level (debug|info|warning|error) writing to w
// (stderr when nil) in format: "json" lines for machines, "console" lines for people
// (zerolog's ConsoleWriter: same fields, aligned and coloured), or "auto": console when w
// is a terminal, since a terminal is read by a person and a pipe or file by a collector.
func NewLogger(level, format string, w io.Writer) zerolog.Logger {
	if w == nil {
		w = os.Stderr
	}
	tty := isTerminal(w)
	if format == "console" || (format == "auto" && tty) {
		w = zerolog.ConsoleWriter{Out: w, NoColor: !tty, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(ParseLevel(level)).With().Timestamp().Logger()
}

// isTerminal reports whether w is a file open on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// ParseLevel maps the config's level names onto zerolog's (warning is zerolog's warn).
func ParseLevel(level string) zerolog.Level {
	switch strings.ToLower(level) {
	case "debug":
		return zerolog.DebugLevel
	case "warning", "warn":
		return zerolog.WarnLevel
	case "error":
		return zerolog.ErrorLevel
	default:
		return zerolog.InfoLevel
	}
}

// Ingest records one answered request of a known source.
func (t *Telemetry) Ingest(source, outcome string, d time.Duration) {
	t.ingestCounter(source, outcome).Inc()
	t.Metrics.IngestDuration.Observe(d.Seconds())
}

// ingestCounter returns the ingest_requests child of source and outcome, looking it up in the vector only once.
func (t *Telemetry) ingestCounter(source, outcome string) prometheus.Counter {
	k := ingestKey{source, outcome}
	t.ingestMu.RLock()
	c, ok := t.ingest[k]
	t.ingestMu.RUnlock()
	if ok {
		return c
	}
	c = t.Metrics.IngestRequests.WithLabelValues(source, outcome)
	t.ingestMu.Lock()
	if t.ingest == nil {
		t.ingest = make(map[ingestKey]prometheus.Counter)
	}
	t.ingest[k] = c
	t.ingestMu.Unlock()
	return c
}

// Refused records a request refused before its source was known to be valid or its body
// read; only the reason is a label.
func (t *Telemetry) Refused(reason string) {
	t.Metrics.IngestRefused.WithLabelValues(reason).Inc()
}

// IngestPanic records an ingest request whose handler panicked.
func (t *Telemetry) IngestPanic() { t.Metrics.IngestPanics.Inc() }

// LoadShed records a request shed because its partition was full.
func (t *Telemetry) LoadShed() { t.Metrics.LoadShed.Inc() }

// Commit records one group commit of the writer.
func (t *Telemetry) Commit(d time.Duration, records, bytes int, err error, class string) {
	if err != nil {
		t.Metrics.CommitFailures.WithLabelValues(class).Inc()
		t.Log.Error().Err(err).Str("class", class).Int("records", records).Msg("store commit failed")
		return
	}
	t.Metrics.CommitDuration.Observe(d.Seconds())
	t.Metrics.CommitBatchSize.Observe(float64(records))
}

// CommitLockWait reports how long one group commit waited for the store's write lock (store.Options.OnCommitWait).
func (t *Telemetry) CommitLockWait(d time.Duration) { t.Metrics.CommitLockWait.Observe(d.Seconds()) }

// SyncWrite reports how long one group commit's synced write ran in RocksDB (store.Options.OnSyncWrite).
func (t *Telemetry) SyncWrite(d time.Duration) { t.Metrics.SyncWrite.Observe(d.Seconds()) }

// IngestQueue reports the records and body bytes the edge's partitions hold (sampled).
func (t *Telemetry) IngestQueue(records, bytes int64) {
	t.Metrics.QueueRecords.Set(float64(records))
	t.Metrics.QueueBytes.Set(float64(bytes))
}

// StoreUnavailable reports how long the store has been unable to commit (0: writable).
func (t *Telemetry) StoreUnavailable(d time.Duration) { t.Metrics.StoreUnavailable.Set(d.Seconds()) }

// StoreReopened counts one reopen of the store after a failed write; err is why it failed, nil when it opened.
func (t *Telemetry) StoreReopened(err error) {
	if err != nil {
		t.Metrics.StoreReopens.WithLabelValues("error").Inc()
		return
	}
	t.Metrics.StoreReopens.WithLabelValues("ok").Inc()
}

// CommitStalled counts a synced write that outran store.commit_stall_ms.
func (t *Telemetry) CommitStalled(running time.Duration) {
	t.Metrics.CommitStalls.Inc()
	t.Log.Warn().Dur("running", running).Msg("store commit stalled: /ready is 503 commit_stalled until it returns")
}

// StoreNextSeq reports the seq the store assigns next (sampled).
func (t *Telemetry) StoreNextSeq(seq uint64) { t.Metrics.StoreNextSeq.Set(float64(seq)) }

// StoreMemory reports one kind of the store's memory outside the Go heap (sampled; kind is one of
// ankusa_store_memory_bytes' kinds): with the Go heap it is what a node's RSS should come to, so a gap
// between them that grows is memory nobody accounts for.
func (t *Telemetry) StoreMemory(kind string, bytes uint64) {
	t.Metrics.StoreMemory.WithLabelValues(kind).Set(float64(bytes))
}

// StoreTrash reports the bytes of obsolete store files waiting for their paced deletion (sampled).
func (t *Telemetry) StoreTrash(bytes uint64) { t.Metrics.StoreTrash.Set(float64(bytes)) }

// SourcesWithoutDedupe reports how many configured sources have no dedupe (each is also a
// boot warning).
func (t *Telemetry) SourcesWithoutDedupe(n int) { t.Metrics.SourcesWithoutDedupe.Set(float64(n)) }

// SubtreeEvent is a failure domain going down or coming back.
type SubtreeEvent struct {
	Kind, Domain, Child, Reason string
	Delay                       time.Duration
}

// Subtree records a supervision event.
func (t *Telemetry) Subtree(ev SubtreeEvent) {
	switch ev.Kind {
	case "subtree_down":
		t.Metrics.SubtreeDown.WithLabelValues(ev.Domain).Inc()
		t.Log.Error().Str("domain", ev.Domain).Str("child", ev.Child).Str("reason", ev.Reason).
			Dur("retry_in", ev.Delay).Msg("failure domain down")
	case "subtree_up":
		t.Log.Info().Str("domain", ev.Domain).Str("child", ev.Child).Msg("failure domain back")
	case "escalated":
		t.Log.Error().Str("domain", ev.Domain).Str("child", ev.Child).Str("reason", ev.Reason).Msg("core restart budget exhausted; stopping instance")
	default:
		t.Log.Warn().Str("domain", ev.Domain).Str("child", ev.Child).Str("reason", ev.Reason).Msg("actor restarted")
	}
}

// DurabilityLine is the one startup line that says what a 2xx means under walType and
// when an acked hook can still be lost; it never claims more than holds.
func DurabilityLine(walType string, backupEnabled bool, backupIntervalMS int) string {
	switch walType {
	case "dual":
		// Inventory E.9, row dual.
		return "durability: wal.type=dual: 2xx means fsynced on this host and confirmed in the intake log; an acked hook is lost only if this host and every in-sync replica of its log partition are lost together (Kafka: replication factor 3, min.insync.replicas 2: two brokers, before they fsync, plus the host)"
	case "none":
		// Inventory E.9, row none: "every sink confirmed | no sink keeps it".
		return "durability: wal.type=none: 2xx means every sink of the source confirmed; an acked hook is lost only if no sink keeps it; no hook is queued on this node, a 503 is the only retry"
	default:
		if backupEnabled {
			return "durability: wal.type=disk: 2xx means fsynced on this host; survives process crash and power loss; a lost host loses at most the hooks acked since the last backup, taken every backup.interval_ms=" +
				strconv.Itoa(backupIntervalMS) + " (none after a clean stop, which takes a final backup)"
		}
		return "durability: wal.type=disk: 2xx means fsynced on this host; survives process crash and power loss, not the loss of this host (backup is off)"
	}
}
