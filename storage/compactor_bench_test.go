package storage

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/store"
)

// BenchmarkCompaction measures the compactor's throughput into segments on LocalFS (MB/s of hook bodies):
// each op compacts perOp freshly committed hooks — read the obligations and hooks, encode, put segment, index
// and manifest (each fsynced), catalogue and clear (unsynced batches). The commit is outside the timer.
// Besides MB/s it reports wall ns/hook and cpu-ns/hook: the process's user+system CPU time (RocksDB's own
// threads included) spent inside the timer per hook, the figure that tells what compaction takes from ingest
// on a busy box, where wall time mostly waits for fsyncs. To see where it goes:
//
//	go test -run '^$' -bench 'Compaction/hooks=8000' -cpuprofile /tmp/c.prof -o /tmp/storage.test ./storage/
//	go tool pprof -top -cum /tmp/storage.test /tmp/c.prof
//	perf record -g -o /tmp/perf.data /tmp/storage.test -test.run '^$' -test.bench 'Compaction/hooks=8000' -test.benchtime 5x
//	perf report -i /tmp/perf.data --children --sort sym -g none   # inside RocksDB (memtable inserts)
func BenchmarkCompaction(b *testing.B) {
	for _, m := range []struct{ perOp, size int }{{1000, 256}, {1000, 1024}, {8000, 1024}, {1000, 10 << 10}} {
		perOp, size := m.perOp, m.size
		b.Run(fmt.Sprintf("hooks=%d/body=%d", perOp, size), func(b *testing.B) {
			db := openStore(b, b.TempDir())
			bs := newLocal(b)
			c := newTestCompactor(b, func() *store.DB { return db }, bs, func(o *CompactorOptions) { o.RollBytes = 16 << 20 })
			recs := make([]*store.Record, perOp)
			var cpu, wall time.Duration
			b.ReportAllocs()
			b.SetBytes(int64(perOp * size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := range recs {
					recs[j] = hookAt(now(), body(j, size))
				}
				commit(b, db, recs...)
				cpu0, wall0 := cpuTime(b), time.Now()
				b.StartTimer()
				for {
					res, err := c.Compact(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if !res.More {
						break
					}
				}
				b.StopTimer()
				cpu, wall = cpu+cpuTime(b)-cpu0, wall+time.Since(wall0)
				b.StartTimer()
			}
			hooks := float64(b.N * perOp)
			b.ReportMetric(float64(wall.Nanoseconds())/hooks, "ns/hook")
			b.ReportMetric(float64(cpu.Nanoseconds())/hooks, "cpu-ns/hook")
		})
	}
}

// cpuTime is the user+system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompactionWaiting measures the compactor's tick while the obligations are younger than roll_ms and
// do not fill roll_bytes (8,000 hooks of 1 KiB waiting against 16 MiB): the tick only decides to wait, and
// its cost is what every storage.interval_ms costs a node whose archive is not due yet. The first tick measures
// the 8,000; the others only what was committed since (nothing here), so with enough ticks cpu-ns/op is the
// cost of a tick, and the 8,000 obligations' measure is paid once, not once a tick for as long as they wait.
func BenchmarkCompactionWaiting(b *testing.B) {
	db := openStore(b, b.TempDir())
	c := newTestCompactor(b, func() *store.DB { return db }, newLocal(b), func(o *CompactorOptions) {
		o.RollBytes, o.RollAge = 16<<20, time.Hour
	})
	recs := make([]*store.Record, 8000)
	for j := range recs {
		recs[j] = hookAt(now(), body(j, 1024))
	}
	commit(b, db, recs...)
	cpu0 := cpuTime(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := c.Compact(context.Background())
		if err != nil || res.Segment != nil {
			b.Fatalf("a waiting tick wrote %v (%v)", res.Segment, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkIngestWithCompaction measures what the storage role adds to each hook ingested, without the HTTP
// side and the load generator of the loopback benchmark: groups of 25 hooks of 1 KiB (one sink each, so the
// compactor deletes none) are committed one after another, alone (archive=false), or each with its archive
// obligation while a compactor packs them (roll_ms 1 s, a tick a second, unpaced, as the loopback runs it)
// and archives what is left after the last commit. It reports the process's CPU per hook (RocksDB's threads
// and the fsyncs' kernel time included) and its user share; the storage role's cost per hook is the
// difference between the two sub-benchmarks.
func BenchmarkIngestWithCompaction(b *testing.B) {
	const group = 25
	for _, archive := range []bool{false, true} {
		b.Run(fmt.Sprintf("archive=%v", archive), func(b *testing.B) {
			db := openStore(b, b.TempDir())
			c := newTestCompactor(b, func() *store.DB { return db }, newLocal(b), func(o *CompactorOptions) {
				o.RollBytes, o.RollAge = 16<<20, time.Second
			})
			recs := make([]*store.Record, group)
			var compactErr error
			stop, stopped := make(chan struct{}), make(chan struct{})
			cpu0, user0 := cpuTimes(b)
			go func() {
				defer close(stopped)
				if !archive {
					return
				}
				t := time.NewTicker(time.Second)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
					}
					for {
						res, err := c.Compact(context.Background())
						if err != nil {
							compactErr = err
							return
						}
						if !res.More {
							break
						}
					}
				}
			}()
			n := 0
			for b.Loop() {
				at := now()
				for j := range recs {
					recs[j] = hookAt(at, body(n+j, 1024), store.SinkBinding{Index: 0, Type: "http"})
					recs[j].Archive = archive
				}
				commit(b, db, recs...)
				n += group
			}
			close(stop)
			<-stopped
			if compactErr != nil {
				b.Fatal(compactErr)
			}
			for db.Counts().ArchivePending > 0 {
				res, err := c.Compact(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if res.Segment == nil && !res.More {
					time.Sleep(50 * time.Millisecond) // the last obligations wait for roll_ms
				}
			}
			cpu, user := cpuTimes(b)
			b.ReportMetric(float64((cpu-cpu0).Nanoseconds())/float64(n), "cpu-ns/hook")
			b.ReportMetric(float64((user-user0).Nanoseconds())/float64(n), "user-ns/hook")
		})
	}
}

// cpuTimes is the user+system and the user CPU time of the process so far.
func cpuTimes(b *testing.B) (cpu, user time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), time.Duration(ru.Utime.Nano())
}
