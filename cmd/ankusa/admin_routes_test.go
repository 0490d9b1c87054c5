package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 12: `ankusa routes list|get|apply -f|delete|test` and `ankusa ip-rules get|set`, tables by default
// and -o json, exit codes a script can rely on.
func TestRoutesCommands(t *testing.T) {
	cli := cliNode(t, "cliroutes", nil)
	file := filepath.Join(t.TempDir(), "routes.yml")
	if err := os.WriteFile(file, []byte(`routes:
  - {id: github, path: /webhooks/github}
  - id: office
    path: /internal/*
    methods: [POST, PUT]
    ip_rules: {default: deny, rules: [{action: allow, cidr: 192.0.2.0/24}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli("routes", "apply", "-f", file); code != 0 || strings.Count(out, "revision 1") != 2 {
		t.Fatalf("apply: exit %d, out %q, err %q", code, out, errOut)
	}
	if code, out, _ := cli("routes", "apply", "-f", file); code != 0 || strings.Count(out, "unchanged") != 2 {
		t.Fatalf("apply again: exit %d, out %q", code, out)
	}
	code, out, _ := cli("routes", "list")
	if code != 0 || !strings.HasPrefix(out, "ID") || !strings.Contains(out, "/internal/*") || !strings.Contains(out, "POST,PUT") {
		t.Fatalf("list: exit %d, out %q", code, out)
	}
	t.Logf("routes list:\n%s", out)
	code, out, _ = cli("routes", "list", "-o", "json")
	var listed map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed["routes"].([]any)) != 2 {
		t.Fatalf("list -o json: exit %d, out %q", code, out)
	}
	if code, out, _ = cli("routes", "get", "office"); code != 0 || !strings.Contains(out, "192.0.2.0/24") {
		t.Fatalf("get: exit %d, out %q", code, out)
	}
	if code, _, errOut := cli("routes", "get", "nope"); code != exitRefused || !strings.Contains(errOut, "route_not_found") {
		t.Fatalf("get absent: exit %d, err %q", code, errOut)
	}
	if code, out, _ = cli("routes", "test", "--path", "/internal/a", "--ip", "198.51.100.1"); code != 0 ||
		!strings.Contains(out, "reject") || !strings.Contains(out, "ip_denied") || !strings.Contains(out, "route deny default") {
		t.Fatalf("test: exit %d, out %q", code, out)
	}
	t.Logf("routes test:\n%s", out)
	bad := filepath.Join(t.TempDir(), "bad.yml")
	_ = os.WriteFile(bad, []byte("routes:\n  - {id: bad, path: '/a/%2F'}\n"), 0o600)
	if code, _, errOut := cli("routes", "apply", "-f", bad); code != exitRefused || !strings.Contains(errOut, "invalid_route") || !strings.Contains(errOut, "field=path") {
		t.Fatalf("apply a bad route: exit %d, err %q", code, errOut)
	}
	if code, _, errOut := cli("routes", "apply"); code != exitUsage {
		t.Fatalf("apply without -f: exit %d, err %q", code, errOut)
	}
	if code, out, _ = cli("routes", "delete", "github"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: exit %d, out %q", code, out)
	}

	if code, out, _ = cli("ip-rules", "set", "--default", "allow", "--rule", "deny:203.0.113.0/24", "--rule", "allow:10.0.0.0/8"); code != 0 ||
		!strings.Contains(out, "203.0.113.0/24") {
		t.Fatalf("ip-rules set: exit %d, out %q", code, out)
	}
	if code, out, _ = cli("ip-rules", "set", "--default", "allow", "--rule", "deny:203.0.113.0/24", "--rule", "allow:10.0.0.0/8"); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("ip-rules set again: exit %d, out %q", code, out)
	}
	if code, _, errOut := cli("ip-rules", "set", "--default", "allow", "--rule", "deny:::ffff:0:0/96"); code != exitRefused || !strings.Contains(errOut, "invalid_ip_rules") {
		t.Fatalf("ip-rules set mapped: exit %d, err %q", code, errOut)
	}
	code, out, _ = cli("ip-rules", "get", "-o", "json")
	var rules map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rules) != nil || len(rules["rules"].([]any)) != 2 {
		t.Fatalf("ip-rules get -o json: exit %d, out %q", code, out)
	}
	if code, out, _ = cli("audit", "list", "--subject", "ip_rules"); code != 0 || strings.Count(out, "ip_rules.update") != 1 {
		t.Fatalf("audit of the rules: exit %d, out %q", code, out)
	}
}
