package test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/test/leak"
	"github.com/ankusa-go/ankusa/test/poll"
)

// binary is the ankusa binary built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ankusa-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ankusa")
	build := exec.Command("go", "build", "-o", binary, "github.com/ankusa-go/ankusa/cmd/ankusa")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot build ankusa:", err)
		os.Exit(1)
	}
	// The nodes run as child processes; what runs in this process (in-process instances,
	// load drivers, watchers of the children) must be gone once the tests end.
	code := leak.Check(m.Run())
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// freePort asks the kernel for a free loopback port.
// testClient bounds every request a test makes: a node that leaves a request hanging
// fails the test instead of hanging it.
var testClient = &http.Client{Timeout: 30 * time.Second}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// node is the ankusa binary running as a child process.
type node struct {
	t       testing.TB
	cmd     *exec.Cmd
	port    int
	admin   int
	logPath string
	exited  chan struct{}
}

const nodeConfig = `instance: %s
node:
  data_dir: %s
  roles: [%s]
http:
  ip: 127.0.0.1
  port: %d
admin:
  port: %d
listener:
  drain_delay_ms: 0
%s`

// logSources is the default sources section: one source with a log sink.
const logSources = `sources:
  sample:
    sinks:
      - type: log
`

// startNode writes a config for dataDir and runs the binary until /ready answers 200.
func startNode(t testing.TB, name, dataDir string) *node {
	return startNodeRoles(t, name, dataDir, ingestOnly, logSources)
}

// ingestOnly runs a node with the edge role alone: what it acks stays in its store.
const ingestOnly = "edge"

// startNodeWith is startNode with a sources section of the caller's, all roles.
func startNodeWith(t testing.TB, name, dataDir, sources string) *node {
	return startNodeRoles(t, name, dataDir, "edge, dispatch, storage", sources)
}

func startNodeRoles(t testing.TB, name, dataDir, roles, sources string) *node {
	t.Helper()
	return startNodeAt(t, name, dataDir, roles, sources, freePort(t), freePort(t))
}

// startNodeAt is startNodeRoles on given ingest and admin ports: a node restarted on the
// same ports is found by a load driver that keeps running across the restart.
func startNodeAt(t testing.TB, name, dataDir, roles, sources string, port, adminPort int) *node {
	t.Helper()
	n := &node{t: t, port: port, admin: adminPort, exited: make(chan struct{})}
	cfgPath := filepath.Join(dataDir, name+".yml")
	cfg := fmt.Sprintf(nodeConfig, name, dataDir, roles, n.port, n.admin, sources)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	launch(t, n, exec.Command(binary, "serve"), cfgPath, name, dataDir)
	return n
}

func (n *node) url(path string) string { return "http://127.0.0.1:" + strconv.Itoa(n.port) + path }

func (n *node) log() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *node) kill() {
	select {
	case <-n.exited:
		return
	default:
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// stop sends SIGTERM and waits for a clean exit.
func (n *node) stop() error {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(60 * time.Second):
		n.kill()
		return fmt.Errorf("node did not stop within 60s")
	}
	if code := n.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("node exited %d; log:\n%s", code, n.log())
	}
	return nil
}

// post sends one hook and returns the status and body.
func post(ctx context.Context, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), err
}

// launch starts cmd (the binary's serve, perhaps behind a shell) with n's config at
// cfgPath and its output in a log file under dataDir, stops it at cleanup, and waits
// until /ready answers 200.
func launch(t testing.TB, n *node, cmd *exec.Cmd, cfgPath, name, dataDir string) {
	t.Helper()
	n.logPath = filepath.Join(dataDir, name+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".log")
	logf, err := os.Create(n.logPath)
	if err != nil {
		t.Fatal(err)
	}
	n.cmd = cmd
	n.cmd.Env = append(os.Environ(), "ANKUSA_CONFIG="+cfgPath, "ANKUSA_LOG_LEVEL=info")
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); _ = logf.Close(); close(n.exited) }()
	t.Cleanup(func() { n.kill() })
	poll.Eventually(t, 60*time.Second, func() error {
		select {
		case <-n.exited:
			t.Fatalf("node exited during start; log:\n%s", n.log())
		default:
		}
		resp, err := testClient.Get(n.url("/ready"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("ready: %d", resp.StatusCode)
		}
		return nil
	})
}
