package load

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// forwardingTarget acknowledges every hook with a fresh id and delivers it to sinkURL before answering,
// except the ids skip says to keep (a node that lost them), and delivers every fifth one twice.
func forwardingTarget(t *testing.T, sinkURL string, skip func(n int64) bool) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	client := &http.Client{Timeout: 5 * time.Second}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		id := fmt.Sprintf("id-%d", i)
		if !skip(i) {
			times := 1
			if i%5 == 0 {
				times = 2
			}
			for range times {
				req, _ := http.NewRequest(http.MethodPost, sinkURL, bytes.NewReader([]byte("{}")))
				req.Header.Set(IDHeader, id)
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("cannot deliver %s: %v", id, err)
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("recorder answered %d", resp.StatusCode)
				}
			}
		}
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"status":"accepted","id":"%s"}`, id)
	}))
	t.Cleanup(func() { srv.Close(); client.CloseIdleConnections() })
	return srv
}

// The recorder holds the node to every acknowledged id: each one that arrived counts as delivered, with a
// latency from its due time, a second arrival counts as a duplicate, and one that never arrived is missing;
// the first request's arrival is when the run's deliveries began.
func TestRecorderChecksEveryAckedID(t *testing.T) {
	f := func(skip func(int64) bool, wantMissing int64) {
		t.Helper()
		rec, err := StartRecorder("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := rec.Close(); err != nil {
				t.Error(err)
			}
		}()
		if !rec.First().IsZero() {
			t.Fatalf("a recorder that received nothing reports its first request at %v", rec.First())
		}
		tg := forwardingTarget(t, rec.URL(), skip)
		start := time.Now()
		rep, err := Run(context.Background(), Options{URL: tg.URL, Workers: 4, Rate: 400, Requests: 200, OnAcked: rec.Acked})
		if err != nil {
			t.Fatal(err)
		}
		d := rec.Deliveries(context.Background(), 200*time.Millisecond)
		if first := rec.First(); first.Before(start) || first.After(time.Now()) {
			t.Fatalf("first request at %v, outside the run (started %v)", first, start)
		}
		wantDup := int64(0)
		for i := int64(5); i <= 200; i += 5 {
			if !skip(i) {
				wantDup++
			}
		}
		if rep.Accepted != 200 || d.Acked != 200 || d.Missing != wantMissing || d.Delivered != 200-wantMissing ||
			d.Duplicates != wantDup || d.Unknown != 0 {
			t.Fatalf("run %v, deliveries %v; want 200 acked, %d missing, %d duplicates", rep, d, wantMissing, wantDup)
		}
		if d.P50 <= 0 || d.P99 < d.P50 || d.Max < d.P99 || d.P999 > d.Max {
			t.Fatalf("delivery latencies out of order: %v", d)
		}
		if wantMissing > 0 && len(d.Missed) == 0 {
			t.Fatalf("missing ids not named: %v", d)
		}
	}
	f(func(int64) bool { return false }, 0)
	f(func(i int64) bool { return i%7 == 0 }, 200/7)
}

// The backlog is the sum of the three queue gauges, labels or none.
func TestScrapeBacklogSumsTheQueueGauges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP ankusa_queue_pending x\nankusa_queue_pending{instance=\"a\"} 12\n"+
			"ankusa_queue_pending_bytes 999\nankusa_queue_scheduled 3\nankusa_queue_inflight{instance=\"a\"} 5e+00\n"+
			"ankusa_queue_dead 7\n")
	}))
	defer srv.Close()
	n, err := ScrapeBacklog(context.Background(), srv.URL)
	if err != nil || n != 20 {
		t.Fatalf("ScrapeBacklog = %d, %v; want 20", n, err)
	}
	empty := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer empty.Close()
	if _, err := ScrapeBacklog(context.Background(), empty.URL); err != ErrNoBacklogSeries {
		t.Fatalf("no gauges: err %v, want ErrNoBacklogSeries", err)
	}
	http.DefaultClient.CloseIdleConnections()
}
