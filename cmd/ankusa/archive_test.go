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
