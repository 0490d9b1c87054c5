package store

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCommitHooks measures one synced group commit by group size, 1 KiB bodies, one sink each. The
// fsync dominates; per-record cost shows as the drop in ns/op per record as groups grow.
func BenchmarkCommitHooks(b *testing.B) {
	for _, group := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("group=%d/body=1KiB", group), func(b *testing.B) {
			db := openTest(b, b.TempDir(), nil)
			recs := make([]*Record, group)
			for i := range recs {
				recs[i] = makeRecord(b, fmt.Sprintf("tenant-%d", i%8), 1024, SinkBinding{Index: 0, Type: "http"})
			}
			// First commit assigns the tenant ordinals, so the loop measures the steady state.
			if _, err := db.CommitHooks(recs); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(group * 1024))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.CommitHooks(recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*group), "ns/record")
		})
	}
}

// BenchmarkCommitHooksArchive measures a group commit of 32 hooks of 1 KiB (one sink each, about the group the
// loopback load makes) with and without the archive obligation the storage role asks of each hook. Besides ns/op,
// dominated by the fsync, it reports the process's CPU time per record and its user share alone (RocksDB's
// threads included), which the fsync's kernel time does not blur: the obligation's cost is the difference.
func BenchmarkCommitHooksArchive(b *testing.B) {
	for _, archive := range []bool{false, true} {
		b.Run(fmt.Sprintf("archive=%v", archive), func(b *testing.B) {
			db := openTest(b, b.TempDir(), nil)
			recs := make([]*Record, 32)
			for i := range recs {
				recs[i] = makeRecord(b, "tenant", 1024, SinkBinding{Index: 0, Type: "http"})
				recs[i].Archive = archive
			}
			if _, err := db.CommitHooks(recs); err != nil {
				b.Fatal(err)
			}
			cpu0, user0 := cpuTimes()
			for b.Loop() {
				if _, err := db.CommitHooks(recs); err != nil {
					b.Fatal(err)
				}
			}
			cpu, user := cpuTimes()
			n := float64(b.N * len(recs))
			b.ReportMetric(float64((cpu-cpu0).Nanoseconds())/n, "cpu-ns/record")
			b.ReportMetric(float64((user-user0).Nanoseconds())/n, "user-ns/record")
		})
	}
}

// cpuTimes is the user+system and the user CPU time the process has used.
func cpuTimes() (cpu, user time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), time.Duration(ru.Utime.Nano())
}

// BenchmarkCommitHooksDuplicates measures the writer's dedupe re-check alone: every record of the group is a
// duplicate of a committed key, so the call reads one key per record and writes nothing.
func BenchmarkCommitHooksDuplicates(b *testing.B) {
	for _, group := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("group=%d", group), func(b *testing.B) {
			db := openTest(b, b.TempDir(), nil)
			recs := make([]*Record, group)
			for i := range recs {
				recs[i] = dedupeRecord(b, fmt.Sprintf("tenant-%d", i%8), fmt.Sprintf("evt_%d", i), dedupeTTL)
			}
			if _, err := db.CommitHooks(recs); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.CommitHooks(recs); err != nil {
					b.Fatal(err)
				}
			}
			if recs[0].Outcome.Status != OutcomeDuplicate {
				b.Fatalf("outcome %+v, want a duplicate", recs[0].Outcome)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*group), "ns/record")
		})
	}
}

// BenchmarkLookupDedupe measures the edge's fast path: one point read.
func BenchmarkLookupDedupe(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	r := dedupeRecord(b, "acme", "evt_1", dedupeTTL)
	if _, err := db.CommitHooks([]*Record{r}); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := db.LookupDedupe("acme", "src", "evt_1", now); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
