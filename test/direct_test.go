package test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// sumRecorder is an HTTP sink's destination that keeps the sha256 of every hook body it
// confirmed, by hook id. It records before it answers, so every confirm it sent is here.
type sumRecorder struct {
	mu   sync.Mutex
	sums map[string][32]byte
}

func newSumRecorder(t testing.TB) (*sumRecorder, *httptest.Server) {
	r := &sumRecorder{sums: map[string][32]byte{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			w.WriteHeader(400)
			return
		}
		r.mu.Lock()
		r.sums[req.Header.Get("X-Ankusa-Id")] = sha256.Sum256(body)
		r.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *sumRecorder) sum(id string) ([32]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sums[id]
	return s, ok
}

// directSources is a sources section under wal.type none: source "sample" publishing to
// an HTTP sink at url.
func directSources(url string) string {
	return fmt.Sprintf("wal:\n  type: none\nsources:\n  sample:\n    sinks:\n      - type: http\n        url: %q\n", url)
}

// Design: "boot refuses a wal: :none config in which no sink of a static source can make
// it" (inventory D.6). The binary's check-config and serve both exit 78 (EX_CONFIG) and
// name the source whose sinks are all non-durable; the source with a durable sink is not
// named.
func TestWalNoneBootRefusesASourceWithoutDurableSink(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "none.yml")
	cfg := fmt.Sprintf(nodeConfig, "none", dir, "edge", freePort(t), freePort(t),
		"wal:\n  type: none\nsources:\n  logonly:\n    sinks:\n      - type: log\n  kept:\n    sinks:\n      - type: log\n      - type: http\n        url: http://127.0.0.1:9/h\n")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"check-config", "serve"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binary, sub)
		cmd.Env = append(os.Environ(), "ANKUSA_CONFIG="+cfgPath)
		out, _ := cmd.CombinedOutput()
		cancel()
		if code := cmd.ProcessState.ExitCode(); code != 78 {
			t.Fatalf("%s exited %d, want 78; output:\n%s", sub, code, out)
		}
		if !strings.Contains(string(out), "sources.logonly.sinks") || strings.Contains(string(out), "sources.kept") {
			t.Fatalf("%s does not name exactly the source without a durable sink:\n%s", sub, out)
		}
	}
}

// TestKill9UnderWalNoneLosesNoAckedHook proves the one rule in direct mode across a crash
// (design: "answers 201 only after each confirmed"; "a replica can be killed … with
// nothing to drain"): the binary under wal.type none takes concurrent POSTs, is killed
// with SIGKILL in the middle of them, and every id answered 201 is at the HTTP sink with
// its body byte for byte. A restart on the same data dir serves again.
func TestKill9UnderWalNoneLosesNoAckedHook(t *testing.T) {
	rec, srv := newSumRecorder(t)
	dataDir := t.TempDir()
	n := startNodeRoles(t, "direct", dataDir, ingestOnly, directSources(srv.URL+"/hook"))
	// Inventory E.9 row none, in one startup line: "every sink confirmed | no sink keeps it".
	if !strings.Contains(n.log(), "durability: wal.type=none: 2xx means every sink of the source confirmed; an acked hook is lost only if no sink keeps it") {
		t.Fatalf("no durability line for wal.type none in the startup log:\n%s", n.log())
	}

	acked, rep := killUnderLoad(t, n, 64)
	t.Logf("load at kill: %s", rep)

	missing, mismatched := 0, 0
	for id, sum := range acked {
		got, ok := rec.sum(id)
		switch {
		case !ok:
			missing++
		case got != sum:
			mismatched++
		}
	}
	ackedAtKill := len(acked)
	rec.mu.Lock()
	received := len(rec.sums)
	rec.mu.Unlock()
	t.Logf("acked=%d at_sink=%d missing=%d body_mismatches=%d", ackedAtKill, received, missing, mismatched)
	if missing != 0 || mismatched != 0 {
		t.Fatalf("%d acked hooks missing at the sink and %d with a different body after kill -9", missing, mismatched)
	}

	n2 := startNodeRoles(t, "direct", dataDir, ingestOnly, directSources(srv.URL+"/hook"))
	status, body, err := post(context.Background(), n2.url("/webhooks/sample"), []byte(`{"after":"restart"}`))
	if err != nil || status != 201 {
		t.Fatalf("post after restart: %d %s %v", status, body, err)
	}
	if err := n2.stop(); err != nil {
		t.Fatal(err)
	}
}
