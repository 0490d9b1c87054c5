package main

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ankusa-go/ankusa/sinks/builtin"
)

// sharedCase is config's table-test case as config/testdata/cases/*.json holds it
// (config/shared_test.go keeps those files equal to the tables).
type sharedCase struct {
	Name string            `json:"name"`
	YAML string            `json:"yaml"`
	Env  map[string]string `json:"env,omitempty"`
}

// Issue: "check-config refuses (exit 78, key path) every sink type, wal.type and role that
// serve cannot build, so the two never disagree". Every config of config's table tests,
// and the embedded default, goes through both: either both refuse it with exit 78, or
// check-config accepts it and serve starts it and stops on SIGTERM with exit 0.
func TestCheckConfigAndServeAgree(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "testdata", "cases", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no shared config cases (%v)", err)
	}
	cases := map[string]sharedCase{"default/embedded": {Name: "embedded"}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cs []sharedCase
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		table := strings.TrimSuffix(filepath.Base(f), ".json")
		for _, c := range cs {
			cases[table+"/"+c.Name] = c
		}
	}
	var accepted, refused int
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if code, _ := agree(t, c); code == 0 {
				accepted++
			} else {
				refused++
			}
		})
	}
	t.Logf("%d configs: %d refused by both, %d accepted by both", len(cases), refused, accepted)
	if accepted == 0 || refused == 0 {
		t.Fatalf("%d accepted and %d refused: the agreement was tested one way only", accepted, refused)
	}
}

// What config accepts but this build cannot run is refused by check-config too, naming
// the key.
func TestCheckConfigRefusesWhatServeCannotBuild(t *testing.T) {
	const logSource = "sources: {s: {sinks: [{type: log}]}}\n"
	cases := map[string]string{
		"wal.type dual without brokers":      "wal: {type: dual}\n" + logSource,
		"wal.type none with only a log sink": "wal: {type: none}\n" + logSource,
		"role claim_check without tokens":    "node: {roles: [edge, claim_check]}\n" + logSource,
		"http sink without url":              "sources: {s: {sinks: [{type: http, timeout_ms: 100}]}}\n",
		"sqs sink without queue_url":         "sources: {s: {sinks: [{type: sqs, region: eu-west-1}]}}\n",
		"google_pubsub sink without topic":   "sources: {s: {sinks: [{type: google_pubsub, project: p}]}}\n",
	}
	paths := map[string]string{
		"wal.type dual without brokers": "intake.brokers", "wal.type none with only a log sink": "sources.s.sinks", "role claim_check without tokens": "claim_check.auth.tokens",
		"http sink without url": "sources.s.sinks[0]", "sqs sink without queue_url": "sources.s.sinks[0]",
		"google_pubsub sink without topic": "sources.s.sinks[0]",
	}
	built := builtin.NewRegistry().Types()
	for _, typ := range []string{"kafka", "rabbitmq", "nats", "redis", "sqs", "google_pubsub"} {
		if slices.Contains(built, typ) {
			continue // built: its options decide, as for http below
		}
		cases[typ+" sink"] = "sources: {s: {sinks: [{type: log}, {type: " + typ + "}]}}\n"
		paths[typ+" sink"] = "sources.s.sinks[1].type"
	}
	// A built broker sink without its required options is refused by the sink itself.
	for _, typ := range []string{"kafka", "nats", "rabbitmq", "redis"} {
		cases[typ+" sink without options"] = "sources: {s: {sinks: [{type: log}, {type: " + typ + "}]}}\n"
		paths[typ+" sink without options"] = "sources.s.sinks[1]"
	}
	for name, yml := range cases {
		t.Run(name, func(t *testing.T) {
			code, msg := agree(t, sharedCase{Name: name, YAML: yml})
			if code != 78 || !strings.Contains(msg, paths[name]+": ") {
				t.Fatalf("check-config exit %d: %s\nwant 78 naming %s", code, msg, paths[name])
			}
		})
	}
}

// Design: "boot refuses a wal: :none config in which no sink of a static source can make
// it". With a durable sink wal.type none is accepted by both check-config and serve
// (which starts and stops); with only a log sink both refuse it naming the source.
func TestWalNoneNeedsADurableSinkPerSource(t *testing.T) {
	ok := "wal: {type: none}\nnode: {roles: [edge]}\nsources: {gh: {sinks: [{type: log}, {type: http, url: \"http://127.0.0.1:9/h\"}]}}\n"
	if code, msg := agree(t, sharedCase{Name: "none with http", YAML: ok}); code != 0 {
		t.Fatalf("check-config exit %d: %s", code, msg)
	}
	bad := "wal: {type: none}\nsources: {gh: {sinks: [{type: log}]}}\n"
	if code, msg := agree(t, sharedCase{Name: "none with log", YAML: bad}); code != 78 || !strings.Contains(msg, "sources.gh.sinks: ") {
		t.Fatalf("check-config exit %d: %s\nwant 78 naming sources.gh.sinks", code, msg)
	}
}

// agree runs c through check-config and serve and fails the test unless both refuse it
// with exit 78 or both accept it (serve starting, then stopping on SIGTERM with exit 0).
// It returns the common exit code and check-config's stderr.
func agree(t *testing.T, c sharedCase) (int, string) {
	t.Helper()
	dir := t.TempDir()
	// Random ports and a private data dir, so that any config the node accepts can start
	// here; the case's own variables win over these.
	env := map[string]string{"ANKUSA_DATA_DIR": filepath.Join(dir, "data"), "ANKUSA_ADMIN_PORT": "0"}
	if _, ok := c.Env["PORT"]; !ok {
		env["ANKUSA_HTTP_PORT"] = "0"
	}
	if c.Name != "embedded" {
		env["ANKUSA_CONFIG"] = filepath.Join(dir, "ankusa.yml")
		if err := os.WriteFile(env["ANKUSA_CONFIG"], []byte(c.YAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	maps.Copy(env, c.Env)

	var checkErr, serveErr bytes.Buffer
	check := runWith([]string{"check-config"}, io.Discard, &checkErr, envOf(env), nil)
	// Queued before serve starts: the first stops it once it has started, the second cuts
	// the drain delay short.
	sig := make(chan os.Signal, 2)
	sig <- syscall.SIGTERM
	sig <- syscall.SIGTERM
	served := runWith([]string{"serve"}, io.Discard, &serveErr, envOf(env), sig)
	if !(check == 78 && served == 78) && !(check == 0 && served == 0) {
		t.Fatalf("check-config exit %d: %s\nserve exit %d: %s", check, checkErr.String(), served, tail(serveErr.String()))
	}
	return check, checkErr.String()
}

// tail is the end of a log, enough to say why serve failed.
func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}
