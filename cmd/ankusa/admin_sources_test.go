package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
)

// cliNode starts an edge node named name whose principal ops (every scope and tenant) holds the CLI's token,
// with a log source sample of tenant acme, and returns a runner of the CLI against it: exit code, stdout, stderr.
func cliNode(t *testing.T, name string, mutate func(*config.Config)) func(args ...string) (int, string, string) {
	t.Helper()
	cli, _ := cliNodeAt(t, name, mutate)
	return cli
}

// cliNodeAt is cliNode that also returns the node's ingest address.
func cliNodeAt(t *testing.T, name string, mutate func(*config.Config)) (func(args ...string) (int, string, string), string) {
	t.Helper()
	const token = "cli-node-token"
	sum := sha256.Sum256([]byte(token))
	inst := fixture.Instance(t, name, func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("acme", 1)}
		cfg.Admin.Principals = []config.Principal{
			{Name: "ops", TokenSHA256: hex.EncodeToString(sum[:]), Scopes: config.AdminScopes, Tenants: []string{"*"}},
		}
		if mutate != nil {
			mutate(cfg)
		}
	}, nil)
	url := "http://" + inst.AdminAddr()
	env := envOf(map[string]string{"ANKUSA_ADMIN_TOKEN": token})
	return func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(append(args, "--admin-url", url), &out, &errOut, env)
		return code, out.String(), errOut.String()
	}, inst.IngestAddr()
}

// Issue 12: `ankusa sources list|apply -f` and `ankusa audit list`, tables by default and -o json.
func TestSourcesAndAuditCommands(t *testing.T) {
	cli := cliNode(t, "clisrc", nil)
	file := filepath.Join(t.TempDir(), "sources.yml")
	if err := os.WriteFile(file, []byte("sources:\n  gh:\n    tenant: acme\n    verify: {type: github, secret: cli-secret-value}\n    sinks:\n      - type: log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli("sources", "apply", "-f", file); code != 0 || !strings.Contains(out, "revision 1") {
		t.Fatalf("sources apply: exit %d, out %q, err %q", code, out, errOut)
	}
	if code, out, _ := cli("sources", "apply", "-f", file); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("sources apply again: exit %d, out %q", code, out)
	}
	code, out, _ := cli("sources", "list", "--tenant", "acme")
	if code != 0 || !strings.HasPrefix(out, "TENANT") || !strings.Contains(out, "gh") || !strings.Contains(out, "persistent") ||
		strings.Contains(out, "cli-secret-value") {
		t.Fatalf("sources list: exit %d, out %q", code, out)
	}
	t.Logf("sources list:\n%s", out)
	code, out, _ = cli("sources", "list", "--tenant", "acme", "-o", "json")
	var listed map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed["sources"].([]any)) != 2 {
		t.Fatalf("sources list -o json: exit %d, out %q", code, out)
	}
	code, out, _ = cli("audit", "list")
	if code != 0 || !strings.HasPrefix(out, "SEQ") || !strings.Contains(out, "source.create") || !strings.Contains(out, "source:acme/gh") {
		t.Fatalf("audit list: exit %d, out %q", code, out)
	}
	t.Logf("audit list:\n%s", out)
	if code, out, _ = cli("audit", "list", "-o", "json"); code != 0 || !strings.Contains(out, `"action":"source.create"`) {
		t.Fatalf("audit list -o json: exit %d, out %q", code, out)
	}
	if code, _, _ = cli("sources", "apply"); code != exitUsage {
		t.Fatalf("apply without -f exits %d", code)
	}
	bad := filepath.Join(t.TempDir(), "bad.yml")
	_ = os.WriteFile(bad, []byte("sources:\n  gh2:\n    tenant: acme\n    sinks: []\n"), 0o600)
	if code, _, errOut := cli("sources", "apply", "-f", bad); code != exitRefused || !strings.Contains(errOut, "invalid_source") {
		t.Fatalf("invalid source exits %d (%q), want %d", code, errOut, exitRefused)
	}
}

// Inventory A.5: `ankusa sources delete` exits 1 with the counts while the source has deliveries to make (an
// edge without dispatch keeps them pending), and --dead-letter deletes it.
func TestSourcesDeleteCommand(t *testing.T) {
	cli, in := cliNodeAt(t, "clisrcdel", nil)
	file := filepath.Join(t.TempDir(), "sources.yml")
	if err := os.WriteFile(file, []byte("sources:\n  gh:\n    tenant: acme\n    sinks:\n      - type: log\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli("sources", "apply", "-f", file); code != 0 {
		t.Fatalf("sources apply: exit %d, out %q, err %q", code, out, errOut)
	}
	for range 2 {
		fixture.Post(t, in, "gh", []byte(`{}`), nil)
	}
	code, _, errOut := cli("sources", "delete", "acme", "gh")
	if code != exitRefused || !strings.Contains(errOut, "source_has_deliveries") || !strings.Contains(errOut, "pending=2") ||
		!strings.Contains(errOut, "inflight=0") {
		t.Fatalf("sources delete with 2 pending: exit %d, err %q", code, errOut)
	}
	t.Logf("refused: %s", strings.TrimSpace(errOut))
	if code, out, _ := cli("sources", "list", "--tenant", "acme"); code != 0 || !strings.Contains(out, "gh") {
		t.Fatalf("the refused delete removed gh: exit %d, out %q", code, out)
	}
	if code, _, errOut := cli("sources", "delete", "acme"); code != exitUsage {
		t.Fatalf("one argument: exit %d, err %q", code, errOut)
	}
	if code, out, errOut := cli("sources", "delete", "acme", "gh", "--dead-letter"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("sources delete --dead-letter: exit %d, out %q, err %q", code, out, errOut)
	}
	code, out, _ := cli("dlq", "list", "-o", "json")
	if code != 0 || strings.Count(out, "{source_gone, gh}") != 2 {
		t.Fatalf("dlq after the delete: exit %d, out %q", code, out)
	}
}
