// Package disk measures the disk as the store uses it: appends of 4 KiB, each followed by fdatasync, as a WAL
// with a synced write per group commit (SyncedAppends), and the ack tail of an ideal group commit at a given rate
// and size (GroupCommit). Benchmarks print them beside their own figures, since on a shared box the disk's tail
// moves from run to run and every ack waits for one such sync.
package disk

import (
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"
)

// Syncs is the sorted latencies of the synced appends of one SyncedAppends.
type Syncs []time.Duration

// Quantile is the p quantile (0..1), rounded to 10 µs.
func (s Syncs) Quantile(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[int(p*float64(len(s)-1))].Round(10 * time.Microsecond)
}

// Max is the slowest, rounded to 10 µs.
func (s Syncs) Max() time.Duration { return s.Quantile(1) }

// String is the count and the p50, p99, p999 and max.
func (s Syncs) String() string {
	return fmt.Sprintf("%d synced 4 KiB appends: p50 %v p99 %v p999 %v max %v", len(s), s.Quantile(0.5),
		s.Quantile(0.99), s.Quantile(0.999), s.Max())
}

// SyncedAppends appends 4 KiB to a new file in dir and fdatasyncs it, pausing gap between two (0: back to back),
// for d; the file is removed at the end.
func SyncedAppends(dir string, d, gap time.Duration) (Syncs, error) {
	f, err := os.CreateTemp(dir, "synced-appends-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
	page := make([]byte, 4<<10)
	var lat Syncs
	for end := time.Now().Add(d); time.Now().Before(end); {
		start := time.Now()
		if _, err := f.Write(page); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	slices.Sort(lat)
	return lat, nil
}
