package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/actors"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Inventory B.3: storage.interval_ms is the compactor tick, "backoff ×2 per failure, jittered, cap 60 s".
func TestBackoffDoublesJitteredCapped(t *testing.T) {
	f := func(failures int, r float64, want time.Duration) {
		t.Helper()
		if got := backoff(time.Second, failures, r); got != want {
			t.Errorf("backoff(1s, %d, %v) = %v, want %v", failures, r, got, want)
		}
	}
	f(1, 0.5, time.Second)
	f(2, 0.5, 2*time.Second)
	f(3, 0, 3200*time.Millisecond) // 4 s − 20 %
	f(3, 1, 4800*time.Millisecond) // 4 s + 20 %
	f(7, 0.5, 60*time.Second)
	f(50, 1, 60*time.Second)
}

// The actor retries a failing blob store on its ticks and, once the store takes writes, archives every hook;
// each failure is counted under its stage.
func TestCompactorActorRetriesAFailingBlobStore(t *testing.T) {
	db := openStore(t, t.TempDir())
	mem := newLocal(t)
	bs := &failingPuts{Store: mem}
	bs.n.Store(3)
	var recs []*store.Record
	for i := range 40 {
		recs = append(recs, hookAt(now(), body(i, 100)))
	}
	commit(t, db, recs...)

	sys := actors.NewSystem("t", zerolog.Nop())
	defer sys.Shutdown()
	tel := telemetry.New("t", zerolog.Nop())
	props := NewCompactorProps(ActorOptions{
		Compactor: CompactorOptions{DB: func() *store.DB { return db }, Blob: bs, Node: "node-a", RollBytes: 2048,
			Log: zerolog.Nop()},
		Interval: 5 * time.Millisecond, Tel: tel,
	})
	pid, err := sys.Root.SpawnNamed(props, "t/storage/compactor")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sys.Root.StopFuture(pid).Wait() }()
	poll.Eventually(t, 10*time.Second, func() error {
		for _, r := range recs {
			if _, err := Fetch(context.Background(), db, mem, r.ID); err != nil {
				return err
			}
		}
		// The actor counts a segment after its catalogue batch, which makes the hooks fetchable: wait for it.
		if got := testutil.ToFloat64(tel.Metrics.Storage.CompactRecords); got != float64(len(recs)) {
			return fmt.Errorf("ankusa_compact_records_total = %v, want %d", got, len(recs))
		}
		return nil
	})
	if got := testutil.ToFloat64(tel.Metrics.Storage.CompactFailures.WithLabelValues(StagePutSegment)); got != 3 {
		t.Fatalf("put_segment failures counted %v, want 3", got)
	}
	if db.Counts().ArchivePending != 0 {
		t.Fatalf("archive pending %d", db.Counts().ArchivePending)
	}
}

// storage.pace_percent: a compaction that worked d while hooks were committed pauses d×(100−p)/p; with no
// commit meanwhile, with pacing off, or with the backlog past max_lag_segments or max_lag_ms it does not.
func TestPaceYieldsToIngestWithinTheLagBounds(t *testing.T) {
	db := openStore(t, t.TempDir())
	now := time.Now()
	a := &compactorActor{o: ActorOptions{
		Compactor:   CompactorOptions{DB: func() *store.DB { return db }},
		PacePercent: 25, MaxLagBytes: 100 << 10, MaxLagAge: time.Minute,
	}}
	seg := func(records int, bytes int64, newest time.Time) Result {
		return Result{More: true, Segment: &Compacted{Records: records,
			Segment: store.SegmentEntry{Bytes: bytes, MaxReceivedAt: newest.UnixMilli()}}}
	}
	const worked = 40 * time.Millisecond
	a.seqAtStart = db.NextSeq()
	if got := a.pause(seg(10, 10<<10, now), worked, now); got != 0 {
		t.Errorf("pause with ingest idle = %v, want 0", got)
	}
	commit(t, db, hookAt(now.UnixMilli(), body(0, 10)))
	if got := a.pause(seg(10, 10<<10, now), worked, now); got != 3*worked {
		t.Errorf("pause while ingest commits = %v, want %v (25 %% of the time)", got, 3*worked)
	}
	a.o.PacePercent = 100
	if got := a.pause(seg(10, 10<<10, now), worked, now); got != 0 {
		t.Errorf("pause with pace_percent 100 = %v, want 0", got)
	}
	a.o.PacePercent = 25
	if got := a.pause(seg(10, 10<<10, now.Add(-time.Minute)), worked, now); got != 0 {
		t.Errorf("pause with the backlog max_lag_ms old = %v, want 0", got)
	}
	// One obligation pending at 200 KiB a record is past max_lag_bytes (100 KiB).
	if got := a.pause(seg(1, 200<<10, now), worked, now); got != 0 {
		t.Errorf("pause with the backlog past max_lag_bytes = %v, want 0", got)
	}
}
