package test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/test/poll"
)

// startNodeNofile runs the binary with its open-files limit (soft and hard) at nofile,
// through the shell's ulimit, until /ready answers 200.
func startNodeNofile(t *testing.T, name, dataDir string, nofile int, httpExtra string) *node {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to lower the open-files limit with")
	}
	n := &node{t: t, port: freePort(t), admin: freePort(t), exited: make(chan struct{})}
	cfg := fmt.Sprintf(nodeConfig, name, dataDir, ingestOnly, n.port, n.admin, logSources)
	cfg = strings.Replace(cfg, "http:\n", "http:\n"+httpExtra, 1)
	cfgPath := filepath.Join(dataDir, name+".yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	launch(t, n, exec.Command(sh, "-c", `ulimit -n "$1" && exec "$0" serve`, binary, strconv.Itoa(nofile)), cfgPath, name, dataDir)
	return n
}

// TestOutOfDescriptorsDoesNotStopIngest reproduces issue 8, item 1 against the binary:
// with the open-files limit at 256, 400 idle connections exhaust the descriptors and
// accepts fail; once they close, the node accepts again and answers 201, where before
// its serve loop ended for good and every later POST hung. The start log names both
// open-files limits.
func TestOutOfDescriptorsDoesNotStopIngest(t *testing.T) {
	dataDir := t.TempDir()
	n := startNodeNofile(t, "nofile", dataDir, 256, "  max_conns_per_ip: 0\n  header_timeout_ms: 60000\n")
	if !strings.Contains(n.log(), `"nofile_soft":256,"nofile_hard":256`) {
		t.Fatalf("start log does not state the open-files limits:\n%s", n.log())
	}
	conns := make([]net.Conn, 0, 400)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range 400 {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(n.port), 5*time.Second)
		if err != nil {
			break // the backlog is full: the point is made
		}
		conns = append(conns, c)
	}
	poll.True(t, 30*time.Second, "accepts failing for want of descriptors", func() bool {
		return strings.Contains(n.log(), "too many open files")
	})
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	// A fresh connection each time: a kept-alive one would not meet the accept path.
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	poll.Eventually(t, 30*time.Second, func() error {
		resp, err := fresh.Post(n.url("/webhooks/sample"), "application/json", strings.NewReader(`{"after":"emfile"}`))
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 201 {
			return fmt.Errorf("POST after the descriptors came back: %d", resp.StatusCode)
		}
		return nil
	})
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
}
