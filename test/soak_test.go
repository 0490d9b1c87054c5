//go:build soak

package test

import (
	"bufio"
	"context"
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
// ANKUSA_SOAK_MINUTES (default 10) and reports RSS growth after the first minute
// (SLO: ≤ 5 % per hour) and the ack latency (SLO: p99 ≤ 50 ms).
func TestSoakMemoryGrowth(t *testing.T) {
	minutes := 10
	if m, err := strconv.Atoi(os.Getenv("ANKUSA_SOAK_MINUTES")); err == nil && m > 1 {
		minutes = m
	}
	inst := startInstance(t, "soak", func(c *config.Config) { c.Node.Roles = []string{"edge", "dispatch", "storage"} }, nil)
	opts := load.Options{URL: ingestURL(inst, "/webhooks/sample"), Rate: 1000, Workers: 64, BodyBytes: 10 << 10, Duration: time.Minute}
	if _, err := load.Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	base := rssKB(t)
	opts.Duration = time.Duration(minutes-1) * time.Minute
	rep, err := load.Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	end := rssKB(t)
	growth := float64(end-base) / float64(base) * 100
	t.Logf("%s; RSS %d kB → %d kB (%.2f%% over %d min)", rep, base, end, growth, minutes-1)
	if rep.P99 > 50*time.Millisecond {
		t.Errorf("ack p99 %v over the 50 ms SLO", rep.P99)
	}
}
