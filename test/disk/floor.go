package disk

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"
)

// Floor is the ack latency of an ideal receiver on a disk (GroupCommit): the least any receiver that syncs
// before it answers can show there at that rate and size, whatever its code.
type Floor struct {
	Rate   float64 // records per second offered
	Size   int     // bytes per record
	Syncs  int     // group commits made
	Acks   Syncs   // per record, sorted: from its arrival to the end of the sync that held it
	Behind int     // records still unsynced when the span ended (not in Acks)
}

// String is the rate, size, groups and ack quantiles.
func (f Floor) String() string {
	s := fmt.Sprintf("ideal group commit of %.0f/s x %d B: %d synced appends of %.1f records, ack p50 %v p99 %v p999 %v max %v",
		f.Rate, f.Size, f.Syncs, float64(len(f.Acks))/float64(max(f.Syncs, 1)), f.Acks.Quantile(0.5),
		f.Acks.Quantile(0.99), f.Acks.Quantile(0.999), f.Acks.Max())
	if f.Behind > 0 {
		s += fmt.Sprintf(", %d records never synced: the disk fell behind the rate", f.Behind)
	}
	return s
}

// GroupCommit runs an ideal group commit on the disk under dir for d: records of size bytes arrive open-loop at
// rate per second, the i-th at i/rate; one writer appends the bytes of every record that has arrived and
// fdatasyncs, again and again, waiting only when none has. A record's ack is the end of the first sync that
// started after it arrived. There is no network, no parsing and no other work, so its tail is the disk's own
// (its slow syncs, and the records that queue behind them) and a receiver's ack tail can come down to it but not
// below it. The wait spins through its last millisecond, so the run takes a core: run it alone. The file is
// removed at the end.
func GroupCommit(dir string, rate float64, size int, d time.Duration) (Floor, error) {
	f := Floor{Rate: rate, Size: size}
	if rate <= 0 || size <= 0 || d <= 0 {
		return f, fmt.Errorf("disk: group commit of %v/s x %d B for %v: rate, size and span must be positive", rate, size, d)
	}
	file, err := os.CreateTemp(dir, "group-commit-")
	if err != nil {
		return f, err
	}
	defer func() { _ = file.Close(); _ = os.Remove(file.Name()) }()
	interval := time.Duration(float64(time.Second) / rate)
	total := int64(d / interval)
	f.Acks = make(Syncs, 0, total)
	var buf []byte
	start := time.Now()
	next := int64(0) // the first record not yet synced; record i arrives at i*interval
	for next < total {
		now := time.Since(start)
		arrived := min(int64(now/interval)+1, total)
		if arrived <= next {
			// Spin through the last millisecond before the next arrival: a shorter sleep would end late (the
			// runtime's poller sleeps whole milliseconds), and the lateness would count against the disk.
			if wait := time.Duration(next)*interval - now; wait > 2*time.Millisecond {
				time.Sleep(wait - time.Millisecond)
			} else {
				runtime.Gosched()
			}
			continue
		}
		n := int(arrived-next) * size
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		if _, err := file.Write(buf[:n]); err != nil {
			return f, err
		}
		if err := syscall.Fdatasync(int(file.Fd())); err != nil {
			return f, err
		}
		end := time.Since(start)
		for i := next; i < arrived; i++ {
			f.Acks = append(f.Acks, end-time.Duration(i)*interval)
		}
		next = arrived
		f.Syncs++
		if end > d+10*time.Second { // a disk that stopped: report what it did rather than wait for it
			break
		}
	}
	f.Behind = int(total - next)
	slices.Sort(f.Acks)
	return f, nil
}
