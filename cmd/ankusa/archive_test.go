package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Issue acceptance: "make run on the embedded default keeps an archive on LocalFS under the data dir, so a
// newcomer sees segments appear; ... fetch a hook back by id (ankusa archive get <id>)". Hooks POSTed to a
// running instance land in segments under <data_dir>/<instance>/segments/archive/v1/, and `archive get`, run
// while the node still runs, prints each body byte for byte.
func TestArchiveGetPrintsTheByteExactBodyWhileTheNodeRuns(t *testing.T) {
	dataDir := t.TempDir()
	inst := fixture.Instance(t, "arch", func(c *config.Config) {
		c.Node.DataDir = dataDir
		c.Admin.Enabled = false
		c.Storage.RollMS, c.Storage.IntervalMS = 1, 20
		c.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
	}, nil)
	bodies := map[string][]byte{}
	for i := range 5 {
		b := fmt.Appendf(nil, "{\"n\":%d,\"raw\":\"\\u0000\"}\r\n\x00\xff", i)
		resp, err := http.Post("http://"+inst.IngestAddr()+"/webhooks/sample", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var a struct{ ID string }
		_ = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("POST answered %d", resp.StatusCode)
		}
		bodies[a.ID] = b
	}
	poll.True(t, 10*time.Second, "every obligation archived", func() bool {
		return inst.Store().Counts().ArchivePending == 0
	})
	segs, _ := filepath.Glob(filepath.Join(dataDir, "arch", "segments", "archive", "v1", "dt=*", "arch", "seg-*.seg"))
	idxs, _ := filepath.Glob(filepath.Join(dataDir, "arch", "segments", "archive", "v1", "dt=*", "arch", "seg-*.idx"))
	if len(segs) == 0 || len(segs) != len(idxs) {
		t.Fatalf("segments %v, indexes %v", segs, idxs)
	}

	p := writeConfig(t, fmt.Sprintf("instance: arch\nnode:\n  data_dir: %s\n", dataDir))
	env := envOf(map[string]string{"ANKUSA_CONFIG": p})
	for id, want := range bodies {
		var out, errOut bytes.Buffer
		if code := run([]string{"archive", "get", id}, &out, &errOut, env); code != 0 {
			t.Fatalf("archive get %s exited %d: %s", id, code, errOut.String())
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("archive get %s printed %q, want %q", id, out.Bytes(), want)
		}
		out.Reset()
		if code := run([]string{"archive", "get", "--json", id}, &out, &errOut, env); code != 0 {
			t.Fatalf("archive get --json exited %d: %s", code, errOut.String())
		}
		var j struct {
			ID, Source string
			BodyBase64 []byte `json:"body_base64"`
		}
		if err := json.Unmarshal(out.Bytes(), &j); err != nil || j.ID != id || j.Source != "sample" || !bytes.Equal(j.BodyBase64, want) {
			t.Fatalf("archive get --json = %s (%v)", out.String(), err)
		}
	}
	var errOut bytes.Buffer
	if code := run([]string{"archive", "get", "01890000-0000-7000-8000-000000000000"}, &bytes.Buffer{}, &errOut, env); code != 1 {
		t.Fatalf("archive get of an unknown id exited %d: %s", code, errOut.String())
	}
	var out bytes.Buffer
	if code := run([]string{"archive", "list"}, &out, &errOut, env); code != 0 || bytes.Count(out.Bytes(), []byte("\n")) != len(segs) {
		t.Fatalf("archive list exited %d: %q", code, out.String())
	}
}

// `ankusa archive replay` records an archive replay job in a stopped node's store (there is no admin API for
// replays yet): refused while the node runs and holds the store, recorded once it stopped, and run by the node
// from its next boot: every hook of the window is committed again.
func TestArchiveReplayRecordsAJobTheNextBootRuns(t *testing.T) {
	dataDir := t.TempDir()
	mutate := func(c *config.Config) {
		c.Node.DataDir = dataDir
		c.Admin.Enabled = false
		c.Storage.RollMS, c.Storage.IntervalMS = 1, 20
		c.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
	}
	inst := fixture.Instance(t, "arep", mutate, nil)
	from := time.Now().UTC().Add(-time.Second)
	for i := range 5 {
		resp, err := http.Post("http://"+inst.IngestAddr()+"/webhooks/sample", "application/json", bytes.NewReader(fmt.Appendf(nil, `{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("POST answered %d", resp.StatusCode)
		}
	}
	poll.True(t, 10*time.Second, "every hook delivered and archived", func() bool {
		c := inst.Store().Counts()
		return c.ArchivePending == 0 && c.Pending+c.Scheduled+c.Inflight == 0
	})
	to := time.Now().UTC().Add(time.Millisecond)
	for time.Now().Before(to) {
		time.Sleep(time.Millisecond)
	}
	p := writeConfig(t, fmt.Sprintf("instance: arep\nnode:\n  data_dir: %s\n", dataDir))
	env := envOf(map[string]string{"ANKUSA_CONFIG": p})
	args := []string{"archive", "replay", "--from", from.Format(time.RFC3339Nano), "--to", to.Format(time.RFC3339Nano)}
	var out, errOut bytes.Buffer
	if code := run(args, &out, &errOut, env); code != 1 {
		t.Fatalf("archive replay beside the running node exited %d: %s", code, errOut.String())
	}
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := run(args, &out, &errOut, env); code != 0 {
		t.Fatalf("archive replay exited %d: %s", code, errOut.String())
	}
	var rec struct {
		ReplayID string `json:"replay_id"`
		State    string
	}
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil || rec.State != "running" {
		t.Fatalf("archive replay printed %s (%v)", out.String(), err)
	}
	if code := run([]string{"archive", "replay", "--from", to.Format(time.RFC3339), "--to", from.Format(time.RFC3339)}, &bytes.Buffer{}, &bytes.Buffer{}, env); code != 2 {
		t.Fatalf("a reversed window exited %d, want 2", code)
	}

	inst = fixture.Instance(t, "arep", mutate, nil)
	poll.True(t, 10*time.Second, "the recorded job run to its end", func() bool {
		jobs, _ := inst.Dispatcher().Replays()
		return len(jobs) == 1 && jobs[0].State == "done" && jobs[0].Moved == 5
	})
	t.Logf("replay %s recorded offline, run at the next boot", rec.ReplayID)
}
