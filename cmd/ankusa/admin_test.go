package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Issue 12: "`ankusa dlq list`, `ankusa replay create|list|pause|resume|cancel`, `ankusa quarantine
// list|release|purge` ... human tables by default and `-o json`, exit codes a script can rely on."
func TestAdminCommandsSpeakToTheAdminAPI(t *testing.T) {
	const token = "cli-token"
	sum := sha256.Sum256([]byte(token))
	// Dead rows for the replay job to move at one a second: on an empty DLQ the job ends done on its first
	// tick and could no longer be paused.
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(422) }))
	t.Cleanup(sink.Close)
	inst := fixture.Instance(t, "cli", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge", "dispatch"}
		cfg.Sources = map[string]config.Source{"sample": {Tenant: "acme",
			Sinks: []config.SinkSpec{{Type: "http", Options: map[string]any{"url": sink.URL}}}}}
		cfg.Admin.Principals = []config.Principal{
			{Name: "ops", TokenSHA256: hex.EncodeToString(sum[:]), Scopes: config.AdminScopes, Tenants: []string{"*"}},
		}
	}, nil)
	url := "http://" + inst.AdminAddr()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(env map[string]string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut, envOf(env))
		return code, out.String(), errOut.String()
	}
	withToken := map[string]string{"ANKUSA_ADMIN_TOKEN": token}
	for range 5 {
		fixture.Post(t, inst.IngestAddr(), "sample", []byte(`{}`), nil)
	}
	poll.True(t, 10*time.Second, "five dead rows", func() bool { return inst.Store().Counts().Dead == 5 })

	code, out, errOut := cli(withToken, "replay", "create", "--admin-url", url, "--source", "sample", "--rate", "1", "-o", "json")
	var job map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &job) != nil || job["state"] != "running" {
		t.Fatalf("replay create: exit %d, out %q, err %q", code, out, errOut)
	}
	id := job["id"].(string)
	if code, out, _ = cli(nil, "replay", "list", "--admin-url", url, "--token-file", tokenFile); code != 0 ||
		!strings.HasPrefix(out, "ID") || !strings.Contains(out, id) || !strings.Contains(out, "running") {
		t.Fatalf("replay list: exit %d, out %q", code, out)
	}
	if code, out, _ = cli(withToken, "replay", "pause", id, "--admin-url", url); code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("replay pause: exit %d, out %q", code, out)
	}
	if code, _, _ = cli(withToken, "replay", "cancel", id, "--admin-url", url); code != 0 {
		t.Fatalf("replay cancel: exit %d", code)
	}
	if code, _, errOut = cli(withToken, "replay", "resume", id, "--admin-url", url); code != exitRefused || !strings.Contains(errOut, "conflict") {
		t.Fatalf("resume a cancelled job: exit %d, err %q, want %d", code, errOut, exitRefused)
	}
	// A lifecycle job on a node without lifecycle.sinks: refused, naming the setting.
	if code, _, errOut = cli(withToken, "replay", "create", "--kind", "lifecycle", "--admin-url", url); code != exitRefused ||
		!strings.Contains(errOut, "lifecycle_disabled") || !strings.Contains(errOut, "lifecycle.sinks") {
		t.Fatalf("replay create --kind lifecycle without lifecycle.sinks: exit %d, err %q, want %d", code, errOut, exitRefused)
	}
	// The job moved at most one row before its pause, and that row failed again: five dead rows.
	poll.True(t, 10*time.Second, "five dead rows after the job", func() bool { return inst.Store().Counts().Dead == 5 })
	if code, out, _ = cli(withToken, "dlq", "list", "--admin-url", url); code != 0 || !strings.Contains(out, "total 5") {
		t.Fatalf("dlq list: exit %d, out %q", code, out)
	}
	if code, out, _ = cli(withToken, "quarantine", "list", "--admin-url", url, "-o", "json"); code != 0 || !strings.Contains(out, `"entries":[]`) {
		t.Fatalf("quarantine list: exit %d, out %q", code, out)
	}
	if code, out, _ = cli(withToken, "quarantine", "purge", "--admin-url", url); code != 0 || !strings.Contains(out, "DELETED") {
		t.Fatalf("quarantine purge: exit %d, out %q", code, out)
	}
	if code, out, _ = cli(withToken, "quarantine", "release", "--admin-url", url); code != 0 || !strings.Contains(out, "RELEASED") {
		t.Fatalf("quarantine release: exit %d, out %q", code, out)
	}

	// Exit codes: 3 for a refused token, 2 for bad usage, 4 for a node that does not answer.
	if code, _, _ = cli(map[string]string{"ANKUSA_ADMIN_TOKEN": "wrong"}, "dlq", "list", "--admin-url", url); code != exitAuth {
		t.Fatalf("a wrong token exits %d, want %d", code, exitAuth)
	}
	if code, _, _ = cli(withToken, "replay", "pause", "../../v1/config", "--admin-url", url); code != exitUsage {
		t.Fatalf("a malformed id exits %d, want %d", code, exitUsage)
	}
	if code, _, _ = cli(withToken, "dlq", "list", "--nope", "--admin-url", url); code != exitUsage {
		t.Fatalf("an unknown flag exits %d, want %d", code, exitUsage)
	}
	if code, _, _ = cli(withToken, "dlq", "list", "--admin-url", "http://127.0.0.1:1"); code != exitUnavailable {
		t.Fatalf("an unreachable node exits %d, want %d", code, exitUnavailable)
	}

	// hooks get: a table of the hook, its headers, deliveries and body; --body the body alone; -o json; an
	// unknown id exits 1. An edge-only node keeps the hook live (nothing delivers it).
	edgeOnly := fixture.Instance(t, "cli-edge", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("acme", 1)}
		cfg.Admin.Principals = inst.Config().Admin.Principals
	}, nil)
	url = "http://" + edgeOnly.AdminAddr()
	hook := fixture.Post(t, edgeOnly.IngestAddr(), "sample", []byte(`{"cli":true}`), nil)
	if code, out, errOut = cli(withToken, "hooks", "get", hook, "--admin-url", url); code != 0 ||
		!strings.Contains(out, "tenant") || !strings.Contains(out, "acme") || !strings.Contains(out, `{"cli":true}`) {
		t.Fatalf("hooks get: exit %d, out %q, err %q", code, out, errOut)
	}
	t.Logf("ankusa hooks get %s:\n%s", hook, out)
	if code, out, _ = cli(withToken, "hooks", "get", hook, "--body", "--admin-url", url); code != 0 || out != `{"cli":true}` {
		t.Fatalf("hooks get --body: exit %d, out %q", code, out)
	}
	if code, out, _ = cli(withToken, "hooks", "get", hook, "-o", "json", "--admin-url", url); code != 0 || !strings.Contains(out, `"body_base64"`) {
		t.Fatalf("hooks get -o json: exit %d, out %q", code, out)
	}
	if code, _, errOut = cli(withToken, "hooks", "get", "0190a8f0-7f3a-7b4c-8d5e-6f708192a3b4", "--admin-url", url); code != exitRefused ||
		!strings.Contains(errOut, "not_found") {
		t.Fatalf("hooks get of an unknown id: exit %d, err %q", code, errOut)
	}
	if code, _, _ = cli(withToken, "tenants", "erase", "acme", "--admin-url", url); code != exitUsage {
		t.Fatalf("tenants erase without --confirm exits %d, want %d", code, exitUsage)
	}
	if code, out, errOut = cli(withToken, "tenants", "erase", "acme", "--confirm", "acme", "--admin-url", url); code != 0 ||
		!strings.Contains(out, "erased") {
		t.Fatalf("tenants erase: exit %d, out %q, err %q", code, out, errOut)
	}
	t.Logf("ankusa tenants erase acme --confirm acme:\n%s", out)
	if code, _, errOut = cli(withToken, "hooks", "get", hook, "--admin-url", url); code != exitRefused {
		t.Fatalf("hooks get of an erased tenant's hook: exit %d, err %q", code, errOut)
	}
}
