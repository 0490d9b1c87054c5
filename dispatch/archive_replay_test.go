package dispatch_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/dispatch"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// archiveNode runs an instance with every role, one HTTP sink per hook of source "s" at url, and a compactor
// that writes a segment as soon as it finds an obligation; dataDir "" is a fresh one.
func archiveNode(t *testing.T, url, dataDir string) *instance.Instance {
	t.Helper()
	return fixture.Instance(t, "arep", func(cfg *config.Config) {
		cfg.Admin.Enabled = false
		cfg.Dispatch.Retry = config.Retry{BaseMS: 20, MaxMS: 200, MaxAttempts: 10}
		cfg.Sources = map[string]config.Source{"s": httpSource("default", url, false)}
		cfg.Storage.RollMS, cfg.Storage.IntervalMS = 1, 10
		if dataDir != "" {
			cfg.Node.DataDir = dataDir
		}
	}, nil)
}

// archived posts n hooks one at a time, each archived before the next is posted (so each has a segment of
// its own), and returns their ids in order.
func archived(t *testing.T, inst *instance.Instance, from, n int) []string {
	t.Helper()
	var ids []string
	for i := from; i < from+n; i++ {
		ids = append(ids, ingest(t, inst, "/webhooks/s", fmt.Appendf(nil, `{"n":%d}`, i)))
		poll.True(t, 10*time.Second, "the hook archived", func() bool { return counts(inst).ArchivePending == 0 })
	}
	return ids
}

// reclaimed waits until every hook was delivered and archived, so the hooks CF is empty: whatever a replay
// delivers then comes from the archive.
func reclaimed(t *testing.T, inst *instance.Instance) {
	t.Helper()
	poll.True(t, 10*time.Second, "hooks delivered and reclaimed", func() bool {
		ids, _ := inst.Store().HookIDs()
		c := counts(inst)
		return len(ids) == 0 && c.Pending+c.Scheduled+c.Inflight+c.ArchivePending == 0
	})
}

// edgeOfWindow returns the unix ms after every hook posted so far: the next hook is received at or after it.
func edgeOfWindow() int64 {
	at := time.Now().UnixMilli() + 1
	for time.Now().UnixMilli() < at {
		time.Sleep(time.Millisecond)
	}
	return at
}

// replayed counts the deliveries of each hook id carrying replay id rid.
func replayed(srv *sinkServer, rid string) map[string]int {
	out := map[string]int{}
	for _, r := range srv.delivered() {
		if r.replayID == rid {
			out[r.id]++
		}
	}
	return out
}

func job(t *testing.T, inst *instance.Instance, id [16]byte) store.ReplayJob {
	t.Helper()
	jobs, err := inst.Dispatcher().Replays()
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("no replay job %s", uuid.UUID(id))
	return store.ReplayJob{}
}

// Inventory F.5: "archive — re-enqueues archived hooks over a received_at window"; "replayed deliveries keep
// id, dedupe_key, idempotency_key, carry replay_id". Hooks delivered and reclaimed from the hooks CF are
// delivered again from their segments: exactly those received in [from, to), under their ids, with the job's
// replay id, once each; the job ends done with that count.
func TestArchiveReplayRedeliversTheWindow(t *testing.T) {
	srv := newSinkServer(t, nil)
	inst := archiveNode(t, srv.URL, "")
	archived(t, inst, 0, 3)
	from := edgeOfWindow()
	want := archived(t, inst, 3, 4)
	to := edgeOfWindow()
	archived(t, inst, 7, 3)
	reclaimed(t, inst)

	j, err := inst.Dispatcher().CreateReplay(dispatch.ReplayRequest{Kind: dispatch.ReplayArchive, Since: from, Until: to})
	if err != nil {
		t.Fatal(err)
	}
	rid := uuid.UUID(j.ID).String()
	poll.True(t, 10*time.Second, "the archive replay done", func() bool { return job(t, inst, j.ID).State == dispatch.JobDone })
	poll.True(t, 10*time.Second, "the replayed hooks delivered", func() bool { return len(replayed(srv, rid)) == len(want) })
	got := replayed(srv, rid)
	for _, id := range want {
		if got[id] != 1 {
			t.Fatalf("hook %s of the window delivered %d times by the replay: %v", id, got[id], got)
		}
	}
	if done := job(t, inst, j.ID); done.Moved != int64(len(want)) || done.Skipped != 0 {
		t.Fatalf("job %+v; want %d moved, none skipped", done, len(want))
	}
	t.Logf("window of %d hooks among 10: %d replayed with replay id %s", len(want), len(got), rid)
}

// Seed: "a replay skips a segment whose objects are gone" (inventory E.5: "a missing segment object ⇒ :error
// (skipped by replay)"). The hooks of the other segments are delivered again; the one whose segment object was
// deleted is not, and the job counts the segment as skipped.
func TestArchiveReplaySkipsAMissingSegment(t *testing.T) {
	srv := newSinkServer(t, nil)
	inst := archiveNode(t, srv.URL, "")
	from := edgeOfWindow()
	ids := archived(t, inst, 0, 4)
	to := edgeOfWindow()
	reclaimed(t, inst)
	gone, _ := edge.ParseID(ids[1])
	e, _, err := inst.Store().ArchivedSegment(gone)
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Blob().Delete(context.Background(), e.SegmentKey); err != nil {
		t.Fatal(err)
	}
	j, err := inst.Dispatcher().CreateReplay(dispatch.ReplayRequest{Kind: dispatch.ReplayArchive, Since: from, Until: to})
	if err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "the archive replay done", func() bool { return job(t, inst, j.ID).State == dispatch.JobDone })
	rid := uuid.UUID(j.ID).String()
	poll.True(t, 10*time.Second, "the replayed hooks delivered", func() bool { return len(replayed(srv, rid)) == 3 })
	if got := replayed(srv, rid); got[ids[1]] != 0 {
		t.Fatalf("hook %s of the deleted segment delivered: %v", ids[1], got)
	}
	if done := job(t, inst, j.ID); done.Skipped != 1 || done.Moved != 3 {
		t.Fatalf("job %+v; want 1 segment skipped, 3 hooks moved", done)
	}
}

// Inventory F.5: "Durable: cursor committed in the same batch as moved rows; resumes after restart". A node
// stopped in the middle of a slow archive replay resumes it after its restart: every hook of the window is
// delivered with the replay id, and none is committed again (the job moves each once); a delivery may repeat
// only as at-least-once allows (an attempt cut by the stop).
func TestArchiveReplayResumesAfterRestart(t *testing.T) {
	srv := newSinkServer(t, nil)
	dataDir := t.TempDir()
	inst := archiveNode(t, srv.URL, dataDir)
	from := edgeOfWindow()
	ids := archived(t, inst, 0, 12)
	to := edgeOfWindow()
	reclaimed(t, inst)
	j, err := inst.Dispatcher().CreateReplay(dispatch.ReplayRequest{Kind: dispatch.ReplayArchive, Since: from, Until: to, Rate: 10})
	if err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "part of the replay committed", func() bool { return job(t, inst, j.ID).Moved >= 3 })
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	before := job2(t, dataDir, j.ID)
	if before.State == dispatch.JobDone {
		t.Fatalf("the replay finished before the stop: %+v", before)
	}

	inst = archiveNode(t, srv.URL, dataDir)
	poll.True(t, 20*time.Second, "the archive replay done", func() bool { return job(t, inst, j.ID).State == dispatch.JobDone })
	rid := uuid.UUID(j.ID).String()
	poll.True(t, 10*time.Second, "every replayed hook delivered", func() bool { return len(replayed(srv, rid)) == len(ids) })
	got := replayed(srv, rid)
	extra := 0
	for _, id := range ids {
		if got[id] == 0 {
			t.Fatalf("hook %s never replayed: %v", id, got)
		}
		extra += got[id] - 1
	}
	if done := job(t, inst, j.ID); done.Moved != int64(len(ids)) {
		t.Fatalf("job %+v moved %d hooks; want each of the %d once", done, done.Moved, len(ids))
	}
	t.Logf("stopped after %d of %d hooks; resumed and finished; %d deliveries repeated", before.Moved, len(ids), extra)
}

// job2 reads replay job id from the store of the stopped node whose data dir is dataDir.
func job2(t *testing.T, dataDir string, id [16]byte) store.ReplayJob {
	t.Helper()
	db, err := store.OpenReadOnly(filepath.Join(dataDir, "arep", "store"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	jobs, err := db.ReplayJobs()
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("no replay job %s in %s", uuid.UUID(id), dataDir)
	return store.ReplayJob{}
}
