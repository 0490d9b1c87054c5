package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

const (
	tenantCount  = 10_000
	seriesBudget = 10_000
)

// Design (SLO table): "/metrics size: ≤ 10 k series/node, independent of tenant count".
// 10,000 tenants each commit a hook through a running instance (tenant_path URLs of one
// shared source), a tenth of them a second one that their quota refuses, and dispatch
// delivers them all; /metrics is counted once ingest ended (dispatch still at work) and
// again once every hook is delivered.
func TestMetricsStayUnderTenThousandSeriesWithTenThousandTenants(t *testing.T) {
	inst := fixture.Instance(t, "series", func(c *config.Config) {
		c.HTTP.Routing = "tenant_path"
		c.HTTP.MaxURLTenants = tenantCount
		src := fixture.LogSource("default", 1) // shared: the URL names the tenant
		src.TrustURLTenant = true
		c.Sources = map[string]config.Source{"s": src}
		// One hook per tenant passes; a tenant's second is refused 429 tenant_overload and
		// counted under its tenant label (tenants the config does not name share "other").
		c.RateLimits.Default = &config.Rate{Rate: 0.001, Burst: 1}
	}, nil)

	post := func(c *http.Client, tenant int) (int, error) {
		u := fmt.Sprintf("http://%s/webhooks/t%05d/s", inst.IngestAddr(), tenant)
		resp, err := c.Post(u, "application/json", strings.NewReader(`{"n":1}`))
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	jobs := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range jobs {
				want := http.StatusCreated
				if n >= tenantCount {
					n, want = n-tenantCount, http.StatusTooManyRequests
				}
				status, err := post(client, n)
				if err == nil && status != want {
					err = fmt.Errorf("tenant t%05d answered %d, want %d", n, status, want)
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	start := time.Now()
	for n := range tenantCount {
		jobs <- n
	}
	// Second hooks for a tenth of the tenants, once their first was answered.
	for n := range tenantCount / 10 {
		jobs <- tenantCount + n*10
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d tenants committed a hook in %v", tenantCount, time.Since(start).Round(time.Millisecond))

	m := inst.Telemetry().Metrics
	if got := testutil.ToFloat64(m.IngestRequests.WithLabelValues("s", telemetry.OutcomeCommitted)); got != tenantCount {
		t.Fatalf("%v hooks committed, want %d", got, tenantCount)
	}
	scrape := func(when string) {
		resp, err := http.Get("http://" + inst.AdminAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		series, tenantLabelled := 0, 0
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			series++
			if strings.Contains(line, `tenant="`) || strings.Contains(line, `tenant_id="`) {
				tenantLabelled++
			}
		}
		t.Logf("%s: /metrics serves %d series (%d with a tenant label), %d bytes", when, series, tenantLabelled, len(body))
		if series > seriesBudget {
			t.Errorf("%s: /metrics serves %d series with %d tenants, want at most %d", when, series, tenantCount, seriesBudget)
		}
	}
	scrape("after ingest")

	delivered := m.Dispatch.Deliveries.WithLabelValues(telemetry.ResultOK, "log")
	poll.True(t, 60*time.Second, "every tenant's hook delivered", func() bool {
		return testutil.ToFloat64(delivered) >= tenantCount
	})
	if got := testutil.ToFloat64(m.Trust.RateLimited.WithLabelValues("other")); got != tenantCount/10 {
		t.Errorf("%v second hooks refused under tenant_id=\"other\", want %d", got, tenantCount/10)
	}
	scrape("delivered")
}
