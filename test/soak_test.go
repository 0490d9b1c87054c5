//go:build soak

package test

import (
	"bufio"
	"context"
	"math"
	"os"
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
// RSS is sampled every 5 s over the measured part and its growth is the least-squares
// trend over all samples, not the difference of two: between two samples RSS moves by
// ±10 % as the heap and RocksDB's memtables fill and drain (a 4-minute run showed
// 109–139 MB with no trend), which would decide a two-point comparison alone. The bound
// is the SLO pro rata over the measured span plus three standard errors of the fitted
// growth, a trend this run's own noise fakes about once in a thousand runs. One standard
// error was 2.9 % over that 3-minute measure and shrinks with the square root of the
// samples, so a 10-minute run allows about 0.75 % + 5 % and an hour about 5 % + 2 %,
// while a leak of 1 % a minute fails either.
func TestSoakMemoryGrowth(t *testing.T) {
	const every, sloPerHour = 5 * time.Second, 5.0
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
	if len(samples) < 6 {
		t.Fatalf("%d RSS samples, too few for a trend", len(samples))
	}
	span := time.Duration(len(samples)-1) * every
	mean, growth, se := trend(samples) // growth and its standard error over the span, % of the mean
	bound := sloPerHour*span.Hours() + 3*se
	t.Logf("%s; RSS mean %d kB, trend %+.2f%% ± %.2f%% over %v, bound %.2f%%; samples every %v (kB): %v",
		res.rep, int(mean), growth, se, span, bound, every, samples)
	if growth > bound {
		t.Errorf("RSS grew %.2f%% over %v: over the bound of %.2f%% (%.0f %%/hour pro rata + 3 standard errors)",
			growth, span, bound, sloPerHour)
	}
	if res.rep.P99 > 50*time.Millisecond {
		t.Errorf("ack p99 %v over the 50 ms SLO", res.rep.P99)
	}
}

// trend fits a least-squares line to samples taken at equal intervals and returns their
// mean, the line's rise over the whole run and the standard error of that rise, both as
// percentages of the mean.
func trend(samples []int) (mean, growth, se float64) {
	n := float64(len(samples))
	mx := (n - 1) / 2
	for _, y := range samples {
		mean += float64(y)
	}
	mean /= n
	var sxx, sxy float64
	for i, y := range samples {
		sxx += (float64(i) - mx) * (float64(i) - mx)
		sxy += (float64(i) - mx) * (float64(y) - mean)
	}
	slope := sxy / sxx
	var rss float64
	for i, y := range samples {
		r := float64(y) - (mean + slope*(float64(i)-mx))
		rss += r * r
	}
	seSlope := math.Sqrt(rss / (n - 2) / sxx)
	return mean, slope * (n - 1) / mean * 100, seSlope * (n - 1) / mean * 100
}
