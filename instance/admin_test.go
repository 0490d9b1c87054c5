package instance_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// gate is a collector whose Collect blocks until it is opened: it holds a /metrics
// scrape in flight.
type gate struct {
	desc    *prometheus.Desc
	entered chan struct{}
	open    chan struct{}
}

func (g *gate) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gate) Collect(ch chan<- prometheus.Metric) {
	close(g.entered)
	<-g.open
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, 1)
}

// Design: "Every request in flight is answered." The admin listener stops with Shutdown:
// it takes no new connection, answers the scrape it is serving, and Stop returns only
// after its serving goroutine ended (TestMain's goleak check).
func TestAdminStopAnswersTheScrapeInFlight(t *testing.T) {
	inst := fixture.Instance(t, "admin", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
	}, nil)
	g := &gate{desc: prometheus.NewDesc("ankusa_test_gate", "Holds a scrape.", nil, nil),
		entered: make(chan struct{}), open: make(chan struct{})}
	inst.Telemetry().Metrics.Registry.MustRegister(g)
	addr := inst.AdminAddr()

	type scrape struct {
		status int
		body   string
		err    error
	}
	scraped := make(chan scrape, 1)
	client := &http.Client{Timeout: 20 * time.Second}
	go func() {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			scraped <- scrape{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		scraped <- scrape{status: resp.StatusCode, body: string(b), err: err}
	}()
	select {
	case <-g.entered:
	case s := <-scraped:
		t.Fatalf("scrape ended before it reached the collector: %+v", s)
	case <-time.After(10 * time.Second):
		t.Fatal("the scrape never reached the collector")
	}

	stopped := make(chan error, 1)
	go func() { stopped <- inst.Stop() }()
	// The admin listener is the last child, so it stops first: once it refuses new
	// connections, its shutdown has begun with the scrape still held.
	poll.Eventually(t, 10*time.Second, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return errors.New("admin still accepts connections")
		}
		return nil
	})
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while the admin server was still serving a scrape", err)
	default:
	}
	close(g.open)
	s := <-scraped
	if s.err != nil || s.status != http.StatusOK || !strings.Contains(s.body, "ankusa_test_gate 1") {
		t.Fatalf("scrape in flight at stop: status %d, err %v, gate metric present %v", s.status, s.err,
			strings.Contains(s.body, "ankusa_test_gate"))
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return after the scrape was answered")
	}
}

// The gauges actor samples the queue and the store's next seq every second through
// telemetry; a scrape shows them without any hook having been sent.
func TestAdminServesSampledGauges(t *testing.T) {
	inst := fixture.Instance(t, "gauges", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
	}, nil)
	client := &http.Client{Timeout: 5 * time.Second}
	poll.Eventually(t, 10*time.Second, func() error {
		resp, err := client.Get("http://" + inst.AdminAddr() + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		// The store's memory: the block cache reports the capacity it was opened with (64 MiB).
		for _, want := range []string{`ankusa_store_next_seq{instance="gauges"} 1`, `ankusa_batcher_queue_records{instance="gauges"} 0`,
			`ankusa_store_memory_bytes{instance="gauges",kind="block_cache_capacity"} 6.7108864e+07`,
			`ankusa_store_trash_bytes{instance="gauges"} 0`} {
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("no %s in the scrape", want)
			}
		}
		return nil
	})
}

// A committed hook's group commit reports its wait for the store's lock: the scrape splits the commit's time
// between that wait and the disk (docs/runbooks/ack-slo.md).
func TestAdminServesTheCommitLockWait(t *testing.T) {
	inst := fixture.Instance(t, "lockwait", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
	}, nil)
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post("http://"+inst.IngestAddr()+"/webhooks/sample", "application/json", strings.NewReader(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST answered %d, want 201", resp.StatusCode)
	}
	status, b := claimGet(t, "http://"+inst.AdminAddr()+"/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("/metrics answered %d", status)
	}
	// Answered 201 only after its commit returned, and the wait is reported inside the commit.
	if want := `ankusa_wal_commit_lock_wait_seconds_count{instance="lockwait"} 1`; !strings.Contains(string(b), want) {
		t.Fatalf("no %s in the scrape", want)
	}
	// The commit's synced write, timed on the store's commit thread, is reported by the same commit.
	if want := `ankusa_wal_sync_write_seconds_count{instance="lockwait"} 1`; !strings.Contains(string(b), want) {
		t.Fatalf("no %s in the scrape", want)
	}
}
