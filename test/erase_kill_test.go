package test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/sinks/claimcheck"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/test/poll"
)

const eraseToken = "erase-token"

// eraseNodeConfig is a node whose admin API has one principal of every scope, with the erase kill switch at
// killStage ("" = none). Its claim store is the local store in <dataDir>/claims.
func eraseNodeConfig(name, dataDir string, port, adminPort int, killStage string) string {
	sum := sha256.Sum256([]byte(eraseToken))
	debug := ""
	if killStage != "" {
		debug = "debug:\n  chaos: true\n  erase_kill_stage: " + killStage + "\n"
	}
	return fmt.Sprintf(`instance: %s
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
      scopes: [tenants:write, dlq:read, audit:read]
      tenants: ["*"]
listener:
  drain_delay_ms: 0
claim_check:
  store:
    type: local
    root: %s
sources:
  acme-in:
    tenant: acme
    sinks: [{type: log}]
  globex-in:
    tenant: globex
    sinks: [{type: log}]
%s`, name, dataDir, port, adminPort, hex.EncodeToString(sum[:]), filepath.Join(dataDir, "claims"), debug)
}

func startEraseNode(t *testing.T, dataDir string, port, adminPort int, killStage string) *node {
	t.Helper()
	n := &node{t: t, port: port, admin: adminPort, exited: make(chan struct{})}
	cfgPath := filepath.Join(dataDir, "erase.yml")
	if err := os.WriteFile(cfgPath, []byte(eraseNodeConfig("erase", dataDir, port, adminPort, killStage)), 0o600); err != nil {
		t.Fatal(err)
	}
	launch(t, n, osexec.Command(binary, "serve"), cfgPath, "erase", dataDir)
	return n
}

func adminCall(method, url string) (int, string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+eraseToken)
	resp, err := testClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Seed, Tenant erase: "The job's progress is synced after each stage, so a kill -9 resumes it at the next boot."
// The binary kills itself (SIGKILL) right after syncing the claims stage, its rows already removed and its
// claim objects, fleet buckets and tombstone not yet; the restarted node finishes the job on its own: one
// tenant.delete audit row, the tenant's hooks and claim objects gone, the other tenant's kept.
func TestTenantEraseResumesAfterKill9(t *testing.T) {
	dataDir := t.TempDir()
	port, adminPort := freePort(t), freePort(t)
	n := startEraseNode(t, dataDir, port, adminPort, "claims")
	admin := func(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", adminPort, path) }
	claims, err := blob.NewLocalFS(filepath.Join(dataDir, "claims"))
	if err != nil {
		t.Fatal(err)
	}
	checker := claimcheck.NewChecker(claims, claimcheck.Options{PackMaxBytes: 1 << 20})
	for i, tenant := range []string{"acme", "acme", "globex"} {
		if _, err := checker.CheckInHook(t.Context(), tenant, [16]byte{byte(i + 1)}, time.Now(), []byte("big body")); err != nil {
			t.Fatal(err)
		}
	}
	countClaims := func(tenant string) int {
		c := 0
		if err := claims.List(t.Context(), claimcheck.TenantPrefix(tenant), func(blob.Object) error { c++; return nil }); err != nil {
			t.Fatal(err)
		}
		return c
	}
	ids := map[string]string{}
	for _, src := range []string{"acme-in", "acme-in", "globex-in"} {
		code, body, err := post(t.Context(), n.url("/webhooks/"+src), []byte(`{"n":1}`))
		if err != nil || code != 201 {
			t.Fatalf("post to %s: %d %s %v", src, code, body, err)
		}
		var ack struct{ ID string }
		_ = json.Unmarshal(body, &ack)
		ids[ack.ID] = src
	}
	// The node dies inside the request: no answer, or a reset.
	code, body, err := adminCall("DELETE", admin("/v1/tenants/acme?confirm=acme"))
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the node did not kill itself at the erase's claims stage (DELETE answered %d %s %v)", code, body, err)
	}
	if !strings.Contains(n.log(), "debug.erase_kill_stage: killing the process") {
		t.Fatalf("the node exited without the erase kill; log:\n%s", n.log())
	}
	if countClaims("acme") != 2 {
		t.Fatalf("acme's claim objects at the kill: %d, want 2 (the claims stage had not run)", countClaims("acme"))
	}
	t.Logf("first run: DELETE answered %d %q (err %v); the node was SIGKILLed after syncing stage claims", code, body, err)

	n2 := startEraseNode(t, dataDir, port, adminPort, "")
	poll.True(t, 30*time.Second, "the resumed erase to commit", func() bool {
		c, b, err := adminCall("DELETE", admin("/v1/tenants/acme?confirm=acme"))
		return err == nil && c == 200 && strings.Contains(b, `"state":"erased"`)
	})
	if !strings.Contains(n2.log(), "resuming an unfinished job") {
		t.Fatalf("the restarted node did not resume the job; log:\n%s", n2.log())
	}
	c, audit, err := adminCall("GET", admin("/v1/audit?tenant_id=acme"))
	if err != nil || c != 200 || strings.Count(audit, `"action":"tenant.delete"`) != 1 {
		t.Fatalf("audit after the resumed erase: %d %s %v", c, audit, err)
	}
	for id, src := range ids {
		c, b, err := adminCall("GET", admin("/v1/hooks/"+id))
		want := 404
		if src == "globex-in" {
			want = 200
		}
		if err != nil || c != want {
			t.Fatalf("GET /v1/hooks/%s (%s) after the resumed erase: %d %s %v, want %d", id, src, c, b, err, want)
		}
	}
	if a, g := countClaims("acme"), countClaims("globex"); a != 0 || g != 1 {
		t.Fatalf("claim objects after the resumed erase: acme %d (want 0), globex %d (want 1)", a, g)
	}
	t.Logf("after the restart: erase committed once (one tenant.delete audit row), acme's hooks 404 and claim objects gone, globex's hooks 200 and claim object kept")
	if err := n2.stop(); err != nil {
		t.Fatal(err)
	}
}
