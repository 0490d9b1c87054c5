package store

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"
)

// buryAll claims every due row of tenant and buries each at the time deadAt gives it.
func buryAll(t *testing.T, db *DB, tenant string, deadAt func(c *Claimed) int64) {
	t.Helper()
	for _, c := range claim(t, db, ordOf(t, db, tenant), farFuture(), 1000, 0) {
		if err := db.Bury(&c, 3, "gave up", deadAt(&c)); err != nil {
			t.Fatal(err)
		}
	}
}

// Inventory F.5: a dlq replay "moves dead rows back to due; only rows dead-lettered ≤ job creation; replayed
// row leaves DLQ"; progress is "committed in the same batch as moved rows; resumes after restart"; replayed
// deliveries "carry replay_id".
func TestReplayMovesOnlyRowsDeadBeforeCreationAndResumes(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	var recs []*Record
	for i := range 10 {
		r := makeRecord(t, []string{"a", "b"}[i%2], 10, SinkBinding{Type: "http"})
		if i == 3 {
			r.Source = "other"
		}
		recs = append(recs, r)
	}
	first := commit(t, db, recs...)
	const created = 5000
	late := first + 9 // dies after the job is created
	for _, tenant := range []string{"a", "b"} {
		buryAll(t, db, tenant, func(c *Claimed) int64 {
			if c.Seq == late {
				return created + 1
			}
			return 1000 + int64(c.Seq)
		})
	}
	job := ReplayJob{ID: newID(), Kind: "dlq", Source: "src", Rate: 10, MaxLagMS: 2000, CreatedAt: created, State: "running"}
	if err := db.PutReplayJob(&job); err != nil {
		t.Fatal(err)
	}
	now := farFuture()
	moved, err := db.ReplayDeadStep(&job, 3, now)
	if err != nil || moved != 3 {
		t.Fatalf("first step moved %d, %v; want 3", moved, err)
	}
	if job.Moved != 3 || job.State != "running" || len(job.Cursor) == 0 {
		t.Fatalf("job after the first step %+v", job)
	}
	requireExactCounters(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, dir, nil)
	jobs, err := db.ReplayJobs()
	if err != nil || len(jobs) != 1 || jobs[0].Moved != 3 || !slices.Equal(jobs[0].Cursor, job.Cursor) {
		t.Fatalf("jobs after reopen %+v, %v", jobs, err)
	}
	j := jobs[0]
	total := 3
	for j.State == "running" {
		n, err := db.ReplayDeadStep(&j, 3, now)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	// Ten rows died: one of another source and one after the job was created stay dead.
	if total != 8 || j.Moved != 8 || j.State != "done" {
		t.Fatalf("replay moved %d (job %+v), want 8 and done", total, j)
	}
	dead, err := db.ListDead("", 100)
	if err != nil {
		t.Fatal(err)
	}
	var left []uint64
	for _, d := range dead {
		left = append(left, d.Seq)
	}
	slices.Sort(left)
	if want := []uint64{first + 3, late}; !slices.Equal(left, want) {
		t.Fatalf("still dead %v, want %v", left, want)
	}
	c := db.Counts()
	if c.Dead != 2 || c.Pending != 8 || c.Scheduled != 0 {
		t.Fatalf("counts after the replay %+v", c)
	}
	requireExactCounters(t, db)

	replayID := uuid.UUID(job.ID).String()
	var back []Claimed
	for _, tenant := range []string{"a", "b"} {
		back = append(back, claim(t, db, ordOf(t, db, tenant), now, 100, 0)...)
	}
	if len(back) != 8 {
		t.Fatalf("claimed %d replayed rows, want 8", len(back))
	}
	for _, r := range back {
		if r.Row.ReplayID != replayID || r.Row.Attempts != 0 || r.Row.DeadReason != "" || r.Row.DeadAt != 0 ||
			r.Row.State != StatePending || r.DueAt != now {
			t.Fatalf("replayed row %+v", r)
		}
	}
	// Done is final: a step moves nothing, even with rows that die now.
	if err := db.Bury(&back[0], 1, "again", now); err != nil {
		t.Fatal(err)
	}
	if n, err := db.ReplayDeadStep(&j, 10, now); err != nil || n != 0 || j.State != "done" {
		t.Fatalf("step of a done job: %d, %v, %+v", n, err, j)
	}
}

// A steer (PutReplayJob) races the replayer's steps: the stored state wins, and progress is never wound back.
func TestReplayStepHonoursTheStoredStateAndPutKeepsProgress(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	var recs []*Record
	for range 4 {
		recs = append(recs, makeRecord(t, "a", 1, SinkBinding{Type: "http"}))
	}
	commit(t, db, recs...)
	buryAll(t, db, "a", func(*Claimed) int64 { return 100 })
	job := ReplayJob{ID: newID(), Kind: "dlq", CreatedAt: 200, State: "running"}
	if err := db.PutReplayJob(&job); err != nil {
		t.Fatal(err)
	}
	stale := job // what a steer read before the step
	if n, err := db.ReplayDeadStep(&job, 1, 300); err != nil || n != 1 {
		t.Fatalf("step: %d, %v", n, err)
	}
	stale.State = "paused"
	if err := db.PutReplayJob(&stale); err != nil {
		t.Fatal(err)
	}
	if stale.Moved != 1 || !slices.Equal(stale.Cursor, job.Cursor) {
		t.Fatalf("PutReplayJob wound progress back: %+v", stale)
	}
	running := job // the replayer's copy still says running
	if n, err := db.ReplayDeadStep(&running, 10, 300); err != nil || n != 0 || running.State != "paused" {
		t.Fatalf("step of a paused job: %d, %v, state %q", n, err, running.State)
	}
	if _, err := db.ReplayDeadStep(&ReplayJob{ID: newID()}, 1, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("step of an unknown job: %v", err)
	}
	requireExactCounters(t, db)
}

func TestReplayJobRoundTrips(t *testing.T) {
	j := ReplayJob{ID: [16]byte{1, 2, 3}, Kind: "dlq", Source: "s", Since: 1, Until: 2, Rate: 12.5, MaxLagMS: 2000,
		CreatedAt: 3, State: "paused", Moved: 4, Cursor: []byte{'x', 0, 1}}
	got, err := DecodeReplayJob(AppendReplayJob(nil, &j))
	if err != nil || got.Kind != j.Kind || got.Rate != j.Rate || !slices.Equal(got.Cursor, j.Cursor) || got.ID != j.ID ||
		got.State != j.State || got.Moved != j.Moved || got.Since != j.Since || got.Until != j.Until {
		t.Fatalf("round trip %+v: got %+v, %v", j, got, err)
	}
	enc := AppendReplayJob(nil, &j)
	for n := range len(enc) {
		if _, err := DecodeReplayJob(enc[:n]); !errors.Is(err, ErrCorruptValue) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
}

func FuzzDecodeReplayJob(f *testing.F) {
	f.Add(AppendReplayJob(nil, &ReplayJob{Kind: "dlq", State: "running", Cursor: []byte("x")}))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := DecodeReplayJob(b)
		if err != nil {
			return
		}
		again, err := DecodeReplayJob(AppendReplayJob(nil, &j))
		if err != nil || again.Kind != j.Kind || again.State != j.State || !slices.Equal(again.Cursor, j.Cursor) ||
			again.Moved != j.Moved {
			t.Fatalf("re-decode of %+v: %+v, %v", j, again, err)
		}
	})
}
