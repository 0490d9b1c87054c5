package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/config"
)

// Issue 12: `ankusa rate-limits list|set|delete`, tables by default and -o json, exit codes a script can use.
func TestRateLimitsCommands(t *testing.T) {
	cli := cliNode(t, "clirl", func(cfg *config.Config) { cfg.RateLimits.Default = &config.Rate{Rate: 100, Burst: 200} })
	if code, out, errOut := cli("rate-limits", "set", "acme", "--rate", "5", "--burst", "10"); code != 0 || !strings.Contains(out, "revision 1") {
		t.Fatalf("set: exit %d, out %q, err %q", code, out, errOut)
	}
	if code, out, _ := cli("rate-limits", "set", "acme", "--rate", "5", "--burst", "10"); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("set again: exit %d, out %q", code, out)
	}
	code, _, errOut := cli("rate-limits", "set", "acme", "--rate", "5")
	if code != exitRefused || !strings.Contains(errOut, "invalid_rate_limit") || !strings.Contains(errOut, "field=burst") {
		t.Fatalf("set without burst: exit %d, err %q", code, errOut)
	}
	code, out, _ := cli("rate-limits", "list")
	if code != 0 || !strings.HasPrefix(out, "TENANT") || !strings.Contains(out, "override") || !strings.Contains(out, "default") {
		t.Fatalf("list: exit %d, out %q", code, out)
	}
	t.Logf("rate-limits list:\n%s", out)
	code, out, _ = cli("rate-limits", "list", "-o", "json")
	var listed map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed["tenants"].([]any)) != 1 {
		t.Fatalf("list -o json: exit %d, out %q", code, out)
	}
	if code, out, errOut = cli("rate-limits", "delete", "acme"); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("delete: exit %d, out %q, err %q", code, out, errOut)
	}
	if code, _, errOut = cli("rate-limits", "delete", "acme"); code != exitRefused || !strings.Contains(errOut, "not_found") {
		t.Fatalf("delete again: exit %d, err %q", code, errOut)
	}
}
