package test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/load"
	"github.com/ankusa-go/ankusa/test/services"
)

// directTarget is one destination BenchmarkLoopbackDirect publishes to under wal.type
// none: start brings it up for the run (closed through b.Cleanup) and returns the sink
// entry that points at it, or false when its service is down outside CI (under CI=true a
// service that is down fails the benchmark).
type directTarget struct {
	name  string
	start func(b *testing.B) (config.SinkSpec, bool)
}

// directTargets are the destinations of BenchmarkLoopbackDirect, each measured against
// disk mode in the same run. A sink type added to the builtin registry joins the
// benchmark by adding its entry here.
var directTargets = []directTarget{
	{name: "http", start: func(b *testing.B) (config.SinkSpec, bool) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
		b.Cleanup(srv.Close)
		return config.SinkSpec{Type: "http", Options: map[string]any{"url": srv.URL + "/hook"}}, true
	}},
	{name: "kafka", start: func(b *testing.B) (config.SinkSpec, bool) {
		// Three brokers, so acks=all waits for in-sync replicas as it would in production.
		c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "hooks"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		brokers := make([]any, 0, 3)
		for _, a := range c.ListenAddrs() {
			brokers = append(brokers, a)
		}
		return config.SinkSpec{Type: "kafka", Options: map[string]any{"brokers": brokers, "topic": "hooks"}}, true
	}},
	{name: "nats", start: func(b *testing.B) (config.SinkSpec, bool) {
		// The machine's JetStream server, a stream of its own (file storage, as a deployment
		// would keep hooks), deleted when the run ends.
		nc, err := nats.Connect("nats://"+services.NATSAddr, nats.Timeout(2*time.Second))
		if err != nil {
			if services.CI() {
				b.Fatalf("NATS is not reachable on %s: %v (CI=true: a benchmark whose service is down fails)", services.NATSAddr, err)
			}
			benchf(b, "none/nats skipped: NATS is not reachable on %s: %v", services.NATSAddr, err)
			return config.SinkSpec{}, false
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			b.Fatal(err)
		}
		u := strconv.FormatInt(time.Now().UnixNano(), 36)
		name, subject := "ANKUSA_BENCH_"+u, "ankusa.bench."+u
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
			nc.Close()
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = js.DeleteStream(context.Background(), name)
			nc.Close()
		})
		return config.SinkSpec{Type: "nats", Options: map[string]any{"servers": []any{"nats://" + services.NATSAddr}, "subject": subject}}, true
	}},
	{name: "rabbitmq", start: func(b *testing.B) (config.SinkSpec, bool) {
		// The machine's RabbitMQ, a durable exchange and queue of its own (persistent messages
		// confirmed once queued durably), deleted when the run ends.
		name, ok := rabbitTopology(b, "ankusa-bench-")
		if !ok {
			return config.SinkSpec{}, false
		}
		return config.SinkSpec{Type: "rabbitmq", Options: map[string]any{"url": services.RabbitMQURL, "exchange": name}}, true
	}},
}

// BenchmarkLoopbackDirect is the direct-mode figure of `make bench`: 1 KB bodies from 64
// connections against an instance under wal.type none whose source publishes to one sink
// (an HTTP endpoint answering 204; a three-broker kfake cluster; a stream on the machine's
// NATS JetStream server; a durable queue on the machine's RabbitMQ), and, in the same run,
// against disk mode (the same source, acked on the synced store commit). It reports each
// side's acks/s and ack p50/p99 and the ratio direct/disk. The load runs once, whatever
// b.N.
func BenchmarkLoopbackDirect(b *testing.B) {
	tuneLikeTheBinary(b)
	opts := load.Options{Workers: 64, BodyBytes: 1024, Duration: benchSeconds(), Timeout: 20 * time.Second}
	for i := 0; i < b.N; i++ {
		if i > 0 {
			break
		}
		httpSpec, _ := directTargets[0].start(b)
		disk := measureMode(b, "bench-disk", config.WALDisk, httpSpec, opts)
		benchf(b, "disk          %s", disk)
		b.ReportMetric(disk.AcceptedPerSec, "disk_acks/s")
		b.ReportMetric(float64(disk.P99)/1e6, "disk_p99_ms")
		for _, tg := range directTargets {
			spec := httpSpec
			if tg.name != "http" {
				var ok bool
				if spec, ok = tg.start(b); !ok {
					continue
				}
			}
			rep := measureMode(b, "bench-"+tg.name, config.WALNone, spec, opts)
			ratio := rep.AcceptedPerSec / disk.AcceptedPerSec
			benchf(b, "none/%-8s %s", tg.name, rep)
			benchf(b, "ratio (none/%s acks/s ÷ disk acks/s) = %.3f", tg.name, ratio)
			b.ReportMetric(rep.AcceptedPerSec, tg.name+"_acks/s")
			b.ReportMetric(float64(rep.P50)/1e6, tg.name+"_p50_ms")
			b.ReportMetric(float64(rep.P99)/1e6, tg.name+"_p99_ms")
			b.ReportMetric(ratio, tg.name+"_ratio")
			if rep.Errors+rep.Shed > 0 {
				benchf(b, "none/%s saw %d errors and %d shed", tg.name, rep.Errors, rep.Shed)
			}
		}
	}
}

// measureMode runs the load against an in-process instance under wal with source
// "sample" publishing to spec (ingest only: under disk nothing delivers, so the figure
// is the ack), and stops it.
func measureMode(b *testing.B, name, wal string, spec config.SinkSpec, opts load.Options) load.Report {
	b.Helper()
	inst := startInstance(b, name, func(c *config.Config) {
		c.Admin.Enabled = false
		c.WAL.Type = wal
		c.Sources = map[string]config.Source{"sample": {Tenant: "default", Sinks: []config.SinkSpec{spec}}}
	}, nil)
	rep, err := load.Measure(context.Background(), ingestURL(inst, "/webhooks/sample"), opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := inst.Stop(); err != nil {
		b.Fatal(err)
	}
	return rep
}
