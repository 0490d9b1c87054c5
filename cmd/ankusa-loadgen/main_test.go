package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ankusa-go/ankusa/test/poll"
)

// binary is the loadgen built once for the tests that run it as a process.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ankusa-loadgen-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ankusa-loadgen")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot build ankusa-loadgen:", err)
		os.Exit(1)
	}
	// The tests start target servers and, in-process, the load driver's goroutines;
	// none may outlive them.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// target answers 201 with a fresh id for most hooks and 503 for every fifth, and
// remembers the sha256 of the body behind each id it acknowledged.
type target struct {
	*httptest.Server
	n      atomic.Int64
	mu     sync.Mutex
	acked  map[string]string // id → sha256 hex of the body received
	header atomic.Value      // last X-Source header seen
}

func newTarget(t *testing.T) *target {
	tg := &target{acked: map[string]string{}}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("cannot read body: %v", err)
			return
		}
		tg.header.Store(r.Header.Get("X-Source"))
		n := tg.n.Add(1)
		if n%5 == 0 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":"overloaded"}`)
			return
		}
		id := fmt.Sprintf("0190a6c4-0000-7000-8000-%012d", n)
		sum := sha256.Sum256(body)
		tg.mu.Lock()
		tg.acked[id] = hex.EncodeToString(sum[:])
		tg.mu.Unlock()
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"status":"accepted","id":"%s"}`, id)
	}))
	t.Cleanup(tg.Close)
	return tg
}

// readOut parses an --out file into id → sha256 hex, failing on a repeated id.
func readOut(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, sum, ok := strings.Cut(sc.Text(), " ")
		if !ok || len(sum) != 64 {
			t.Fatalf("malformed line %q", sc.Text())
		}
		if _, dup := got[id]; dup {
			t.Fatalf("id %s written twice", id)
		}
		got[id] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// The chaos tests hold the server to every line of --out: the file must have one
// line per acknowledged id, "id sha256hex" of exactly the body the server received,
// and nothing for a shed request; a second run appends.
func TestOutFileHasOneLinePerAcceptedID(t *testing.T) {
	tg := newTarget(t)
	out := filepath.Join(t.TempDir(), "acked.txt")
	runBinary := func(requests int) string {
		cmd := exec.Command(binary, "--url", tg.URL+"/webhooks/sample", "--workers", "8",
			"--requests", fmt.Sprint(requests), "--body-bytes", "256", "--header", "X-Source=cli",
			"--out", out)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("loadgen: %v\n%s", err, stderr.String())
		}
		return stdout.String()
	}
	report := runBinary(500)
	if !strings.Contains(report, "sent=500 accepted=400 ") || !strings.Contains(report, "shed=100 ") {
		t.Fatalf("report %q, want 500 sent, 400 accepted, 100 shed", report)
	}
	runBinary(100)

	got := readOut(t, out)
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if len(got) != 480 || len(tg.acked) != 480 {
		t.Fatalf("--out has %d ids, target acked %d; want 480 each", len(got), len(tg.acked))
	}
	for id, sum := range tg.acked {
		if got[id] != sum {
			t.Fatalf("id %s: --out says %q, target received body with sha256 %s", id, got[id], sum)
		}
	}
	if h, _ := tg.header.Load().(string); h != "cli" {
		t.Fatalf("--header not sent: X-Source=%q", h)
	}
}

// --json prints the report as one JSON object with the counts.
func TestJSONReport(t *testing.T) {
	tg := newTarget(t)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--url", tg.URL, "--requests", "50", "--workers", "5", "--json"},
		&stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Sent, Accepted, Shed, Errors int64
		P50                          float64 `json:"p50_ms"`
		P99                          float64 `json:"p99_ms"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report %q: %v", stdout.String(), err)
	}
	if rep.Sent != 50 || rep.Accepted != 40 || rep.Shed != 10 || rep.Errors != 0 || rep.P50 <= 0 || rep.P99 < rep.P50 {
		t.Fatalf("report %+v", rep)
	}
}

// The run could not start: exit 2 and nothing sent.
func TestBadInvocationExitsTwo(t *testing.T) {
	tg := newTarget(t)
	f := func(args ...string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != exitNoStart {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitNoStart, stderr.String())
		}
	}
	f()                                                    // no --url
	f("--url", tg.URL)                                     // neither --requests nor --duration
	f("--url", "ftp://x/", "--requests", "1")              // not http
	f("--url", tg.URL, "--requests", "1", "--header", "x") // header not k=v
	f("--url", tg.URL, "--requests", "1", "--out", filepath.Join(t.TempDir(), "missing", "f"))
	if n := tg.n.Load(); n != 0 {
		t.Fatalf("%d requests sent by invocations that could not start", n)
	}
}

// Lines reach the file as they are acknowledged, not at exit: with the loadgen
// killed mid-run (kill -9, no chance to flush anything), the file already holds
// whole lines, each one for an id the target acknowledged with that body.
func TestOutLinesSurviveAKill(t *testing.T) {
	tg := newTarget(t)
	out := filepath.Join(t.TempDir(), "acked.txt")
	cmd := exec.Command(binary, "--url", tg.URL, "--workers", "4", "--duration", "1m", "--out", out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	poll.True(t, 20*time.Second, "100 lines in the out file", func() bool {
		info, err := os.Stat(out)
		return err == nil && info.Size() >= 100*(36+1+64+1)
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	got := readOut(t, out)
	if len(got) < 100 {
		t.Fatalf("%d lines after the kill, want at least 100", len(got))
	}
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for id, sum := range got {
		if tg.acked[id] != sum {
			t.Fatalf("line for %s (%s) was not acknowledged with that body", id, sum)
		}
	}
}
