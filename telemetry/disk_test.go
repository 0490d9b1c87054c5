package telemetry

import (
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// The disk gauges describe the filesystem of the data dir, read at scrape time, and say
// nothing rather than 0 when it cannot be read (a 0 would page "disk full").
func TestDiskGaugesReadTheDataDirFilesystem(t *testing.T) {
	values := func(dir string) map[string]float64 {
		tel := New("disk", zerolog.Nop())
		tel.Disk(dir)
		mfs, err := tel.Metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if n := mf.GetName(); n == "ankusa_disk_free_bytes" || n == "ankusa_disk_total_bytes" {
				out[n] = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return out
	}
	got := values(t.TempDir())
	free, total := got["ankusa_disk_free_bytes"], got["ankusa_disk_total_bytes"]
	if total <= 0 || free <= 0 || free > total {
		t.Fatalf("free %v of total %v: want 0 < free <= total", free, total)
	}
	if got := values(filepath.Join(t.TempDir(), "missing")); len(got) != 0 {
		t.Fatalf("a data dir that does not exist reported %v, want no series", got)
	}
}
