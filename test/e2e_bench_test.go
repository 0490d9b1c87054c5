package test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/load"
)

// arrivals records when each hook reached the sink.
type arrivals struct {
	mu   sync.Mutex
	lags []time.Duration
	seen map[string]bool
}

func (a *arrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	id := r.Header.Get("x-ankusa-id")
	received, ok := fixture.ReceivedAt(id)
	a.mu.Lock()
	if ok && !a.seen[id] {
		a.seen[id] = true
		a.lags = append(a.lags, now.Sub(received))
	}
	a.mu.Unlock()
	w.WriteHeader(204)
}

// BenchmarkEndToEndHTTPSink is the delivery figure of `make bench`: 1 KB hooks from 64
// connections through ingest, the store and dispatch to a local HTTP sink. It reports
// hooks/s acked, hooks/s delivered (POST to sink confirm, over the same window plus the
// drain) and the delivery latency p50/p99 from the edge's receipt to the sink.
func BenchmarkEndToEndHTTPSink(b *testing.B) {
	tuneLikeTheBinary(b)
	for i := 0; i < b.N; i++ {
		if i > 0 {
			break
		}
		dest := &arrivals{seen: map[string]bool{}}
		srv := httptest.NewServer(dest)
		inst := startInstance(b, "e2e", func(c *config.Config) {
			c.Admin.Enabled = false
			c.Node.Roles = []string{"edge", "dispatch", "storage"}
			c.Sources = map[string]config.Source{"sample": {Tenant: "default", Sinks: []config.SinkSpec{{Type: "http", Options: map[string]any{"url": srv.URL}}}}}
		}, nil)
		start := time.Now()
		rep, err := load.Run(context.Background(), load.Options{URL: ingestURL(inst, "/webhooks/sample"), Workers: 64, BodyBytes: 1024, Duration: benchSeconds()})
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			dest.mu.Lock()
			n := len(dest.seen)
			dest.mu.Unlock()
			if int64(n) >= rep.Accepted || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		elapsed := time.Since(start)
		dest.mu.Lock()
		lags := slices.Clone(dest.lags)
		dest.mu.Unlock()
		slices.Sort(lags)
		if len(lags) == 0 {
			b.Fatal("nothing delivered")
		}
		p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]
		benchf(b, "ingest %s", rep)
		benchf(b, "delivered %d of %d acked in %v: %.0f hooks/s end to end; delivery latency p50 %v p99 %v",
			len(lags), rep.Accepted, elapsed.Round(time.Millisecond), float64(len(lags))/elapsed.Seconds(), p50, p99)
		b.ReportMetric(rep.AcceptedPerSec, "acked/s")
		b.ReportMetric(float64(len(lags))/elapsed.Seconds(), "delivered/s")
		b.ReportMetric(float64(p50)/1e6, "delivery_p50_ms")
		b.ReportMetric(float64(p99)/1e6, "delivery_p99_ms")
		_ = inst.Stop()
		srv.Close()
		if int64(len(lags)) < rep.Accepted {
			b.Fatalf("%d acked hooks not delivered within the drain window", rep.Accepted-int64(len(lags)))
		}
	}
}
