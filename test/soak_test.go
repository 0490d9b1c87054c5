//go:build soak

package test

import (
	"bufio"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/load"
)

func rssKB(t testing.TB) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb
		}
	}
	return 0
}

// TestSoakMemoryGrowth runs ingest and delivery (log sink) at 1,000 hooks/s of 10 KB for
// ANKUSA_SOAK_MINUTES (default 10; the first minute is warm-up) and asserts the SLOs: RSS
// growth ≤ 5 % per hour after warm-up, ack p99 ≤ 50 ms.
//
// RSS is sampled every 5 s over the measured part. Growth compares the median of its
// first tenth of samples with the median of its last tenth (at least 3 each), so one GC
// cycle or memtable flush at either end does not decide the run. The bound is the SLO pro
// rata over the time between those two windows, plus 2 % of the baseline for what a run
// this short cannot tell from a leak (RSS moves by about that much between samples as the
// heap and RocksDB's memtables fill and drain): 2.75 % over the default 10 minutes,
// 7 % over an hour. A run long enough to make the slack small is the soak to trust.
func TestSoakMemoryGrowth(t *testing.T) {
	const every, sloPerHour, noise = 5 * time.Second, 5.0, 2.0
	minutes := 10
	if m, err := strconv.Atoi(os.Getenv("ANKUSA_SOAK_MINUTES")); err == nil && m > 1 {
		minutes = m
	}
	inst := startInstance(t, "soak", func(c *config.Config) { c.Node.Roles = []string{"edge", "dispatch", "storage"} }, nil)
	opts := load.Options{URL: ingestURL(inst, "/webhooks/sample"), Rate: 1000, Workers: 64, BodyBytes: 10 << 10, Duration: time.Minute}
	if _, err := load.Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}

	type result struct {
		rep load.Report
		err error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a failed sample ends the load too
	done := make(chan result, 1)
	opts.Duration = time.Duration(minutes-1) * time.Minute
	go func() {
		rep, err := load.Run(ctx, opts)
		done <- result{rep, err}
	}()
	var samples []int
	tk := time.NewTicker(every)
	defer tk.Stop()
	var res result
	for running := true; running; {
		select {
		case res = <-done:
			running = false
		case <-tk.C:
			samples = append(samples, rssKB(t))
		}
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	n := max(3, len(samples)/10)
	if len(samples) < 2*n {
		t.Fatalf("%d RSS samples, too few to compare", len(samples))
	}
	base, end := median(samples[:n]), median(samples[len(samples)-n:])
	span := time.Duration(len(samples)-n) * every // between the centres of the two windows
	growth := float64(end-base) / float64(base) * 100
	bound := sloPerHour*span.Hours() + noise
	t.Logf("%s; RSS %d kB → %d kB (%.2f%% over %v, bound %.2f%%)", res.rep, base, end, growth, span, bound)
	if growth > bound {
		t.Errorf("RSS grew %.2f%% over %v: over the bound of %.2f%% (%.0f %%/hour pro rata + %.0f %% noise)",
			growth, span, bound, sloPerHour, noise)
	}
	if res.rep.P99 > 50*time.Millisecond {
		t.Errorf("ack p99 %v over the 50 ms SLO", res.rep.P99)
	}
}

// median of a copy of xs.
func median(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
