package test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/load"
	"github.com/ankusa-go/ankusa/test/reference"
)

// benchSeconds is how long each side of a load benchmark runs (ANKUSA_BENCH_SECONDS).
func benchSeconds() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("ANKUSA_BENCH_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 5 * time.Second
}

// BenchmarkLoopbackIngest is the loopback load of `make bench`: 1 KB bodies from 64
// connections against an Ankusa instance, then, in the same run, against the reference
// server (a fasthttp handler feeding one goroutine that syncs up to 1,024 hook and
// delivery rows per RocksDB WriteBatch). It reports both sides' hooks/s and ack p50/p99
// and their ratio. The instance runs the storage role beside the edge, with roll_ms at
// one second so the compactor packs segments during the run (the bound: ingest
// with the compactor running); dispatch is off, so the hooks stay in the store. The load
// is run once, whatever b.N: it is a throughput run, not a per-op measurement.
func BenchmarkLoopbackIngest(b *testing.B) {
	opts := load.Options{Workers: 64, BodyBytes: 1024, Duration: benchSeconds(), Timeout: 20 * time.Second}
	for i := 0; i < b.N; i++ {
		if i > 0 {
			break
		}
		inst := startInstance(b, "bench", func(c *config.Config) {
			c.Admin.Enabled = false
			c.Node.Roles = []string{config.RoleEdge, config.RoleStorage}
			c.Storage.RollMS = 1000
		}, nil)
		ours, err := load.Measure(context.Background(), ingestURL(inst, "/webhooks/sample"), opts)
		if err != nil {
			b.Fatal(err)
		}
		var m dto.Metric
		_ = inst.Telemetry().Metrics.CommitBatchSize.Write(&m)
		groups := m.GetHistogram().GetSampleCount()
		sm := inst.Telemetry().Metrics.Storage
		segments, archived := testutil.ToFloat64(sm.CompactSegments), testutil.ToFloat64(sm.CompactRecords)
		if err := inst.Stop(); err != nil {
			b.Fatal(err)
		}

		ref, err := reference.Start(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		theirs, err := load.Measure(context.Background(), ref.URL(), opts)
		_ = ref.Close()
		if err != nil {
			b.Fatal(err)
		}

		b.Logf("ankusa    %s (group commits: %d, %.1f hooks each)", ours, groups, m.GetHistogram().GetSampleSum()/float64(max(groups, 1)))
		b.Logf("compactor during the run: %.0f segments, %.0f hooks archived", segments, archived)
		b.Logf("reference %s", theirs)
		ratio := ours.AcceptedPerSec / theirs.AcceptedPerSec
		b.Logf("ratio (ankusa/reference hooks/s) = %.3f", ratio)
		b.ReportMetric(ours.AcceptedPerSec, "hooks/s")
		b.ReportMetric(float64(ours.P50)/1e6, "p50_ms")
		b.ReportMetric(float64(ours.P99)/1e6, "p99_ms")
		b.ReportMetric(theirs.AcceptedPerSec, "ref_hooks/s")
		b.ReportMetric(float64(theirs.P50)/1e6, "ref_p50_ms")
		b.ReportMetric(float64(theirs.P99)/1e6, "ref_p99_ms")
		b.ReportMetric(ratio, "ratio")
		if ours.Errors+ours.Shed > 0 {
			b.Logf("ankusa side saw %d errors and %d shed", ours.Errors, ours.Shed)
		}
	}
}
