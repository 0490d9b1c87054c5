package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// adminToken is the bearer token of the operator principal the audit tests' nodes configure.
const adminToken = "audit-test-token"

// startAdminNode runs the binary (edge role, one log source) with an operator principal of every scope.
func startAdminNode(t *testing.T, name, dataDir string) *node {
	t.Helper()
	return startAdminNodeWith(t, name, dataDir, "")
}

// startAdminNodeWith is startAdminNode with extra top-level config (YAML) appended.
func startAdminNodeWith(t *testing.T, name, dataDir, extra string) *node {
	t.Helper()
	n := &node{t: t, port: freePort(t), admin: freePort(t), exited: make(chan struct{})}
	sum := sha256.Sum256([]byte(adminToken))
	cfg := fmt.Sprintf(`instance: %s
node:
  data_dir: %s
  roles: [edge]
http:
  ip: 127.0.0.1
  port: %d
admin:
  port: %d
  principals:
    - name: ops
      token_sha256: %s
      scopes: [log_level:write, audit:read, sources:read, sources:write, routes:write, dlq:read, replays:write]
      tenants: ["*"]
listener:
  drain_delay_ms: 0
%s%s`, name, dataDir, n.port, n.admin, hex.EncodeToString(sum[:]), logSources, extra)
	cfgPath := filepath.Join(dataDir, name+".yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	launch(t, n, exec.Command(binary, "serve"), cfgPath, name, dataDir)
	return n
}

func (n *node) adminURL(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(n.admin) + path
}

// adminCall sends one admin request with the operator's token and decodes the JSON answer.
func (n *node) adminCall(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, n.adminURL(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// Issue 12 acceptance, TestAuditRowSurvivesKill9: a change answered 2xx has its audit row in the store after
// a kill -9 right after the answer.
func TestAuditRowSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	n := startAdminNode(t, "auditkill", dir)
	status, body := n.adminCall(t, "PUT", "/v1/log-level", `{"level":"debug"}`)
	if status != http.StatusOK {
		t.Fatalf("PUT /v1/log-level: %d %v", status, body)
	}
	status, body = n.adminCall(t, "PUT", "/v1/tenants/default/sources/gh", `{"sinks":[{"type":"log"}]}`)
	if status != http.StatusCreated {
		t.Fatalf("PUT source: %d %v", status, body)
	}
	n.kill()
	n = startAdminNode(t, "auditkill", dir)
	// The source committed with its row: the restarted edge takes hooks for it.
	if code, _, err := post(context.Background(), n.url("/webhooks/gh"), []byte(`{}`)); err != nil || code != http.StatusCreated {
		t.Fatalf("ingest to the API source after kill -9: %d %v", code, err)
	}
	status, body = n.adminCall(t, "GET", "/v1/audit", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/audit: %d %v", status, body)
	}
	entries, _ := body["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("rows after kill -9: %v", body)
	}
	for i, want := range []string{"log_level.set", "source.create"} {
		row := entries[i].(map[string]any)
		if row["action"] != want || row["actor"] != "ops" || row["status"] != "ok" {
			t.Fatalf("row %d after kill -9: %v", i, row)
		}
		t.Logf("row after kill -9 and restart: seq=%v action=%v subject=%v actor=%v status=%v revision=%v",
			row["seq"], row["action"], row["subject"], row["actor"], row["status"], row["revision"])
	}
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
}
