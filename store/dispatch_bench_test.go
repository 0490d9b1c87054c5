package store

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildDue commits n first attempts (16-byte bodies, one sink) for one tenant, in groups of 4096, and returns
// the store and the tenant's ordinal.
func buildDue(b *testing.B, n int) (*DB, uint32) {
	b.Helper()
	start := time.Now()
	db := openTest(b, b.TempDir(), nil)
	val := AppendHook(nil, &Hook{Tenant: "acme", Source: "src", Body: make([]byte, 16)})
	sinks := []SinkBinding{{Index: 0, Type: "http"}}
	const group = 4096
	recs := make([]*Record, 0, group)
	for done := 0; done < n; {
		recs = recs[:0]
		for ; len(recs) < group && done < n; done++ {
			recs = append(recs, &Record{Tenant: "acme", Source: "src", ReceivedAt: 1, Size: 16, Value: val, Sinks: sinks})
		}
		commit(b, db, recs...)
	}
	if c := db.Counts(); c.Pending != int64(n) {
		b.Fatalf("built %+v, want %d pending", c, n)
	}
	b.Logf("built %d due rows in %v", n, time.Since(start).Round(time.Millisecond))
	return db, ordOf(b, db, "acme")
}

// BenchmarkClaimDue claims 128 rows from the head of one tenant's due index, at 1k and at 1M due rows. The
// claimed rows are put back at the tail (timer stopped), so the head moves through the backlog leaving the
// tombstones of earlier claims behind it, as a draining queue does. Seed: "The scan costs the tenants with work
// due, not the backlog": ns/op must not grow with the backlog.
func BenchmarkClaimDue(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("due=%d/claim=128", n), func(b *testing.B) {
			db, ord := buildDue(b, n)
			now := farFuture()
			tail := time.Now().UnixMilli() + 1
			var cs []Claimed
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				var err error
				cs, err = db.ClaimDue(ord, now, 128, 0, cs[:0])
				if err != nil || len(cs) != 128 {
					b.Fatalf("claimed %d, %v", len(cs), err)
				}
				b.StopTimer()
				for i := range cs {
					if err := db.Reschedule(&cs[i], 0, tail, ""); err != nil {
						b.Fatal(err)
					}
				}
				tail++
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCounts reads the node-wide queue counters at 1k and 100k rows. Seed: "the queue gauges are six
// counter reads, so a tick costs the same at a thousand queued rows as at a million".
func BenchmarkCounts(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("due=%d", n), func(b *testing.B) {
			db, _ := buildDue(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if c := db.Counts(); c.Pending != int64(n) {
					b.Fatalf("counts %+v", c)
				}
			}
		})
	}
}

// BenchmarkDrainPage is the store's share of delivering a backlog: each op claims a page of 128 rows of 1 KiB
// hooks, reads each row's hook as an attempt needs it and completes the rows from 32 goroutines, as the
// dispatcher's attempts do. ns/op over 128 is the store's cost per delivered hook.
func BenchmarkDrainPage(b *testing.B) {
	const page, workers = 128, 32
	db := openTest(b, b.TempDir(), nil)
	val := AppendHook(nil, &Hook{Tenant: "acme", Source: "src", ContentType: "application/json", Body: make([]byte, 1024),
		Headers: []Header{{Name: "x-github-event", Value: "push"}}})
	sinks := []SinkBinding{{Index: 0, Type: "http"}}
	n := (b.N + 1) * page
	for done := 0; done < n; {
		recs := make([]*Record, 0, 1024)
		for ; len(recs) < cap(recs) && done < n; done++ {
			recs = append(recs, &Record{Tenant: "acme", Source: "src", ReceivedAt: 1, Size: uint32(len(val)), Value: val, Sinks: sinks})
		}
		commit(b, db, recs...)
	}
	ord := ordOf(b, db, "acme")
	now := farFuture()
	var cs []Claimed
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		var err error
		cs, err = db.ClaimDue(ord, now, page, 0, cs[:0])
		if err != nil || len(cs) != page {
			b.Fatalf("claimed %d, %v", len(cs), err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(cs); i += workers {
					c := &cs[i]
					if c.Hook == nil {
						h, err := db.GetHook(c.Seq)
						if err != nil {
							errs <- err
							return
						}
						c.Hook = &h
					}
					if len(c.Hook.Body) != 1024 {
						errs <- fmt.Errorf("hook %d: body of %d bytes", c.Seq, len(c.Hook.Body))
						return
					}
					if err := db.Complete(c); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*page), "ns/hook")
	// The box may be shared: the process's CPU time per hook (RocksDB's threads included) varies less.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*page), "cpu-ns/hook")
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
