package test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/load"
	"github.com/ankusa-go/ankusa/test/reference"
)

// BenchmarkDeliveryVsReference is the delivery figure of `make bench` (issue 11): the same backlog of
// ANKUSA_BENCH_BACKLOG hooks of 1 KiB (default 100,000) is stored twice, then drained to a local HTTP sink
// (load.Recorder: fasthttp, answers 200, records ids) once by an instance with the dispatch role and default
// settings through the http sink, once by the delivery reference (reference.Deliver: one reader, 32 workers on
// a pool of 32 keep-alive connections, deletes in batches). Each clock runs from before the node (or the
// reference) opens the store until the recorder holds every id and the store is drained. It prints both
// hooks/s and their ratio (acceptance: >= 1.0) for each of ANKUSA_BENCH_ROUNDS rounds (default 3), which
// alternate which side goes first (ANKUSA_BENCH_ORDER=reverse: the reference in the first), and the medians.
// ANKUSA_BENCH_SIDE=node (or reference) runs one round of one side only, for a CPU profile of it:
//
//	ANKUSA_BENCH_SIDE=node ANKUSA_BENCH_BACKLOG=30000 go test -run '^$' -bench DeliveryVsReference \
//	    -benchtime 1x -cpuprofile /tmp/delivery.pprof ./test/ && go tool pprof -top test.test /tmp/delivery.pprof
func BenchmarkDeliveryVsReference(b *testing.B) {
	tuneLikeTheBinary(b)
	n := backlogSize()
	for i := 0; i < b.N; i++ {
		if i > 0 {
			break
		}
		runs := []func() float64{
			func() float64 { return drainNodeHTTP(b, n) },
			func() float64 { return drainReference(b, n) },
		}
		side := os.Getenv("ANKUSA_BENCH_SIDE")
		// Rounds alternate which side goes first (ANKUSA_BENCH_ORDER=reverse starts with the reference), and the
		// median round is the figure: the box's speed drifts by a third between runs a minute apart.
		var ratios, nodes, refs []float64
		for round := range benchRounds(3) {
			order := []int{0, 1}
			if (round%2 == 1) != (os.Getenv("ANKUSA_BENCH_ORDER") == "reverse") {
				order = []int{1, 0}
			}
			got := make([]float64, len(runs))
			for _, j := range order {
				if side != "" && side != []string{"node", "reference"}[j] {
					got[j] = 1
					continue
				}
				syscall.Sync()
				got[j] = runs[j]()
			}
			node, ref := got[0], got[1]
			benchf(b, "round %d: delivery of %d hooks to a local HTTP sink: ankusa %.0f hooks/s, reference %.0f hooks/s, ratio %.3f",
				round+1, n, node, ref, node/ref)
			ratios, nodes, refs = append(ratios, node/ref), append(nodes, node), append(refs, ref)
			if side != "" {
				break // a profile of one side needs one round
			}
		}
		benchf(b, "median of %d rounds: ankusa %.0f hooks/s, reference %.0f hooks/s, ratio %.3f (rounds %s)",
			len(ratios), medianOf(nodes), medianOf(refs), medianOf(ratios), fmtRatios(ratios))
		b.ReportMetric(medianOf(nodes), "hooks/s")
		b.ReportMetric(medianOf(refs), "ref_hooks/s")
		b.ReportMetric(medianOf(ratios), "ratio")
	}
}

func fmtRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, ", ")
}

// drainNodeHTTP seeds n hooks for the http sink, starts an instance with dispatch on them, and returns the
// hooks/s at which they reached the recorder.
func drainNodeHTTP(b *testing.B, n int) float64 {
	b.Helper()
	rec := startRecorder(b)
	dir := b.TempDir()
	const name = "delivery-node"
	cfg := config.Default()
	cfg.Instance, cfg.Node.DataDir = name, dir
	if err := reference.SeedBacklog(cfg.StoreDir(), "http", n); err != nil {
		b.Fatal(err)
	}
	start, cpu0 := time.Now(), cpuTime()
	in := fixture.InstanceWith(b, name, func(c *config.Config) {
		c.Node.DataDir = dir
		c.Node.Roles = []string{"edge", "dispatch"}
		c.Admin.Enabled = false
		c.Sources = map[string]config.Source{"sample": {Tenant: "default",
			Sinks: []config.SinkSpec{{Type: "http", Options: map[string]any{"url": rec.URL()}}}}}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(b)).Level(zerolog.ErrorLevel)})
	db := in.Store()
	deadline := start.Add(time.Duration(n/200)*time.Second + time.Minute)
	for {
		c := db.Counts()
		if rec.Received() >= int64(n) && c.Pending+c.Scheduled+c.Inflight == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("node: after %v the recorder holds %d of %d ids, the store %+v; attempts %s",
				time.Since(start).Round(time.Second), rec.Received(), n, c, attemptsByResult(in, "http"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	var okAttempts dto.Metric
	_ = in.Telemetry().Metrics.Dispatch.AttemptDuration.WithLabelValues("http", telemetry.ResultOK).(prometheus.Metric).Write(&okAttempts)
	h := okAttempts.GetHistogram()
	mean := time.Duration(h.GetSampleSum() / float64(max(h.GetSampleCount(), 1)) * float64(time.Second))
	if err := in.Stop(); err != nil {
		b.Fatal(err)
	}
	d := rec.Deliveries(context.Background(), 0)
	benchf(b, "ankusa:    %d hooks delivered in %v (%.0f hooks/s, %.1f us CPU/hook; the first after %v), %d received twice; mean successful POST %v; attempts %s",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), cpuPerHook(cpu, n), rec.First().Sub(start).Round(time.Millisecond),
		d.Duplicates, mean.Round(time.Microsecond), attemptsByResult(in, "http"))
	return float64(n) / elapsed.Seconds()
}

// drainReference seeds n hooks and drains them with reference.Deliver at dispatch's default concurrency.
func drainReference(b *testing.B, n int) float64 {
	b.Helper()
	rec := startRecorder(b)
	dir := b.TempDir()
	if err := reference.SeedBacklog(dir, "http", n); err != nil {
		b.Fatal(err)
	}
	start, cpu0 := time.Now(), cpuTime()
	rep, err := reference.Deliver(context.Background(), reference.DeliverOptions{Dir: dir, URL: rec.URL(),
		Conns: config.Default().Dispatch.Concurrency})
	cpu := cpuTime() - cpu0
	if err != nil {
		b.Fatal(err)
	}
	if rep.Delivered != n || rec.Received() != int64(n) {
		b.Fatalf("reference delivered %d, the recorder holds %d of %d ids", rep.Delivered, rec.Received(), n)
	}
	benchf(b, "reference: %d hooks delivered in %v (%.0f hooks/s, %.1f us CPU/hook; the first after %v), %d failed POSTs retried",
		n, rep.Elapsed.Round(time.Millisecond), rep.HooksPerSec(), cpuPerHook(cpu, n), rec.First().Sub(start).Round(time.Millisecond), rep.Failed)
	return rep.HooksPerSec()
}

// startRecorder starts a sink recorder on a free loopback port, closed when b ends.
func startRecorder(b testing.TB) *load.Recorder {
	b.Helper()
	rec, err := load.StartRecorder("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := rec.Close(); err != nil {
			b.Error(fmt.Errorf("cannot stop the recorder: %w", err))
		}
	})
	return rec
}

// cpuTime is the user and system CPU time the process has used. On a shared box the CPU time a side spends per
// hook (the recorder's share included, which is the same for both) tells its cost apart from the box's load,
// which moves the hooks/s of two runs apart.
func cpuTime() time.Duration {
	ru := selfUsage()
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// contextSwitches is how many times this process's threads were switched out so far, voluntarily or not.
func contextSwitches() int64 {
	ru := selfUsage()
	return ru.Nvcsw + ru.Nivcsw
}

// selfUsage is this process's getrusage (zero when it fails: the figures then read as nothing used).
func selfUsage() syscall.Rusage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru
}

func cpuPerHook(cpu time.Duration, n int) float64 {
	return float64(cpu.Microseconds()) / float64(max(n, 1))
}
