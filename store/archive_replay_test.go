package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Inventory F.5: an archive replay "re-enqueues archived hooks"; progress is "committed in the same batch as
// moved rows; resumes after restart"; replayed deliveries keep their id and "carry replay_id". A step commits
// its hooks as new ones (fresh seqs, pending rows for the sinks given, no dedupe, no archive obligation) with
// the job's cursor; a reopened store has both or neither, and a paused job's step commits nothing.
func TestRedriveArchivedStepCommitsHooksWithTheJobsProgress(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	job, err := NewReplayJob(ReplayJob{Kind: ReplayKindArchive, Since: 1, Until: time.Now().UnixMilli()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutReplayJob(&job); err != nil {
		t.Fatal(err)
	}
	var recs []*Record
	for range 3 {
		r := makeRecord(t, "a", 10, SinkBinding{Type: "http"}, SinkBinding{Index: 1, Type: "log"})
		r.ReplayID, r.Archive, r.DedupeKey, r.DedupeTTL = uuid.UUID(job.ID).String(), true, "k", time.Hour
		recs = append(recs, r)
	}
	before := db.NextSeq()
	cur := ArchiveCursor{Segment: 7, Seq: 42}
	n, err := db.RedriveArchivedStep(&job, recs, cur, 2, false)
	if err != nil || n != 3 {
		t.Fatalf("step committed %d, %v; want 3", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	jobs, err := db.ReplayJobs()
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs %+v, %v", jobs, err)
	}
	j := jobs[0]
	if got, _ := ParseArchiveCursor(j.Cursor); got != cur || j.Moved != 3 || j.Skipped != 2 || j.State != "running" {
		t.Fatalf("job after the step %+v", j)
	}
	c := db.Counts()
	if c.Pending != 6 || c.ArchivePending != 0 || db.NextSeq() != before+3 {
		t.Fatalf("counts %+v, next seq %d; want 6 pending rows, no obligation, 3 seqs taken", c, db.NextSeq())
	}
	requireExactCounters(t, db)
	for _, r := range claim(t, db, ordOf(t, db, "a"), farFuture(), 100, 0) {
		if r.Row.ReplayID != uuid.UUID(job.ID).String() || r.Row.Attempts != 0 || r.Seq < before {
			t.Fatalf("redriven row %+v", r)
		}
	}
	if n, _ := db.CountIndex('u'); n != 0 {
		t.Fatalf("%d dedupe keys written by a replay", n)
	}

	j.State = "paused"
	if err := db.PutReplayJob(&j); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RedriveArchivedStep(&j, []*Record{makeRecord(t, "a", 1, SinkBinding{Type: "http"})}, ArchiveCursor{Segment: 9}, 0, true); err != nil || n != 0 || j.State != "paused" {
		t.Fatalf("step of a paused job: %d, %v, %+v", n, err, j)
	}
}

// An archive replay's window must be ordered and over: a later to would let the job pass hooks not archived yet.
func TestNewReplayJobRefusesABadArchiveWindow(t *testing.T) {
	now := time.Now()
	for _, w := range [][2]int64{{0, 10}, {10, 10}, {20, 10}, {10, now.Add(time.Hour).UnixMilli()}} {
		if _, err := NewReplayJob(ReplayJob{Kind: ReplayKindArchive, Since: w[0], Until: w[1]}, now); !errors.Is(err, ErrReplayJob) {
			t.Fatalf("window %v: %v, want ErrReplayJob", w, err)
		}
	}
	if _, err := NewReplayJob(ReplayJob{Kind: "quarantine"}, now); !errors.Is(err, ErrReplayJob) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// A job recorded by an older node (version 1: no tenant filter, no skipped count) still decodes.
func TestReplayJobVersion1Decodes(t *testing.T) {
	j := ReplayJob{ID: newID(), Kind: "dlq", Source: "s", Rate: 5, State: "running", Moved: 4, Cursor: []byte{1, 2}}
	b := AppendReplayJob(nil, &j)
	b[0] = jobVersionV1
	b = b[:len(b)-1-8] // no tenant (empty: one length byte), no skipped
	got, err := DecodeReplayJob(b)
	if err != nil || got.Moved != 4 || got.Source != "s" || string(got.Cursor) != "\x01\x02" {
		t.Fatalf("version 1 job = %+v, %v", got, err)
	}
}
