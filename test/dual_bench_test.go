package test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/load"
)

// BenchmarkLoopbackDual is the cost of wal.type dual against disk in the same run (design: "the two halves run
// in parallel, so the ack costs the larger of the fsync and the confirm, not their sum"): the loopback load of
// `make bench` (1 KB bodies, 64 connections, ingest only) against an instance under disk, then under dual with
// the intake log on three kfake brokers. It reports each side's hooks/s and ack p50/p99 and the ratio. kfake
// keeps its log in memory, so the confirm here is a loopback round trip, not a replicated fsync.
func BenchmarkLoopbackDual(b *testing.B) {
	tuneLikeTheBinary(b)
	opts := load.Options{Workers: 64, BodyBytes: 1024, Duration: benchSeconds(), Timeout: 20 * time.Second}
	for i := 0; i < b.N; i++ {
		if i > 0 {
			break
		}
		disk := measureWAL(b, "bench-disk", nil, opts)
		c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "ankusa-intake"))
		if err != nil {
			b.Fatal(err)
		}
		dual := measureWAL(b, "bench-dual", c.ListenAddrs(), opts)
		c.Close()
		benchf(b, "disk  %s", disk)
		benchf(b, "dual  %s", dual)
		ratio := dual.AcceptedPerSec / disk.AcceptedPerSec
		benchf(b, "ratio (dual acks/s ÷ disk acks/s) = %.3f", ratio)
		b.ReportMetric(disk.AcceptedPerSec, "disk_acks/s")
		b.ReportMetric(float64(disk.P50)/1e6, "disk_p50_ms")
		b.ReportMetric(float64(disk.P99)/1e6, "disk_p99_ms")
		b.ReportMetric(dual.AcceptedPerSec, "dual_acks/s")
		b.ReportMetric(float64(dual.P50)/1e6, "dual_p50_ms")
		b.ReportMetric(float64(dual.P99)/1e6, "dual_p99_ms")
		b.ReportMetric(ratio, "ratio")
		for name, r := range map[string]load.Report{"disk": disk, "dual": dual} {
			if r.Errors+r.Shed > 0 {
				benchf(b, "%s saw %d errors and %d shed", name, r.Errors, r.Shed)
			}
		}
	}
}

// measureWAL runs the load against an in-process edge-only instance, under dual when brokers are given (else
// disk), and stops it.
func measureWAL(b *testing.B, name string, brokers []string, opts load.Options) load.Report {
	b.Helper()
	inst := startInstance(b, name, func(c *config.Config) {
		c.Admin.Enabled = false
		c.Node.Roles = []string{config.RoleEdge}
		if brokers != nil {
			c.WAL.Type = config.WALDual
			c.Intake.Brokers = brokers
		}
	}, nil)
	if brokers != nil {
		deadline := time.Now().Add(30 * time.Second)
		for inst.Intake().Recovering() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	rep, err := load.Measure(context.Background(), ingestURL(inst, "/webhooks/sample"), opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := inst.Stop(); err != nil {
		b.Fatal(err)
	}
	return rep
}
