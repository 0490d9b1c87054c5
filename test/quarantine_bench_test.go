package test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/load"
	"github.com/ankusa-go/ankusa/verify"
)

// flood posts forged hooks (no valid signature) round-robin over sources at rate per
// second until ctx ends, and returns how many got each status and their p99 latency.
func flood(ctx context.Context, addr string, sources int, rate float64) (map[int]int, time.Duration) {
	const workers = 50
	var mu sync.Mutex
	statuses := map[int]int{}
	var lats []time.Duration
	var wg sync.WaitGroup
	per := time.Duration(float64(time.Second) * workers / rate)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A plain dial: fasthttp's default dialer starts a DNS-cache cleaner that
			// outlives the benchmark by minutes and fails the package's leak check.
			c := &fasthttp.HostClient{Addr: addr, MaxConns: 1, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
				Dial: func(a string) (net.Conn, error) { return net.DialTimeout("tcp", a, 10*time.Second) }}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			body := make([]byte, 1024)
			for i := range body {
				body[i] = 'f'
			}
			next := time.Now()
			for i := w; ctx.Err() == nil; i += workers {
				next = next.Add(per)
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				req.SetRequestURI(fmt.Sprintf("http://%s/webhooks/forged-%d", addr, i%sources))
				req.Header.SetMethod("POST")
				req.Header.Set("X-Hub-Signature-256", "sha256=00")
				req.SetBody(body)
				status, t0 := 0, time.Now()
				if err := c.DoTimeout(req, resp, 10*time.Second); err == nil {
					status = resp.StatusCode()
				}
				mu.Lock()
				statuses[status]++
				lats = append(lats, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(lats)
	if len(lats) == 0 {
		return statuses, 0
	}
	return statuses, lats[len(lats)*99/100]
}

// BenchmarkQuarantineFlood is the forged-flood figure of `make bench` (design: "5 000
// forged hooks/s over 500 sources, p99 < 50 ms, a clean source's p99 within 2× of its
// solo p99"): a clean source sends 100 hooks/s alone, then again while 5,000 forged
// hooks/s hit 500 quarantine sources.
func BenchmarkQuarantineFlood(b *testing.B) {
	tuneLikeTheBinary(b)
	for i := 0; i < b.N; i++ {
		if i > 0 {
			break
		}
		inst := startInstance(b, "flood", func(c *config.Config) {
			c.Admin.Enabled = false
			for s := range 500 {
				c.Sources[fmt.Sprintf("forged-%d", s)] = config.Source{Tenant: "default", Sinks: []config.SinkSpec{{Type: "log"}},
					Verify: verify.Spec{Type: "github", Secret: verify.Secrets{"s3cret"}}, OnVerifyFailure: "quarantine"}
			}
		}, nil)
		clean := load.Options{URL: ingestURL(inst, "/webhooks/sample"), Rate: 100, Workers: 16, BodyBytes: 1024, Duration: benchSeconds()}
		solo, err := load.Run(context.Background(), clean)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var statuses map[int]int
		var floodP99 time.Duration
		done := make(chan struct{})
		go func() { statuses, floodP99 = flood(ctx, inst.IngestAddr(), 500, 5000); close(done) }()
		time.Sleep(500 * time.Millisecond)
		loaded, err := load.Run(context.Background(), clean)
		cancel()
		<-done
		if err != nil {
			b.Fatal(err)
		}
		benchf(b, "clean source alone:       %s", solo)
		benchf(b, "clean source under flood: %s", loaded)
		benchf(b, "forged flood answers by status: %v; flood p99 %v", statuses, floodP99)
		b.ReportMetric(float64(floodP99)/1e6, "flood_p99_ms")
		b.ReportMetric(float64(solo.P99)/1e6, "clean_solo_p99_ms")
		b.ReportMetric(float64(loaded.P99)/1e6, "clean_flood_p99_ms")
		b.ReportMetric(float64(loaded.P99)/float64(solo.P99), "ratio")
	}
}
