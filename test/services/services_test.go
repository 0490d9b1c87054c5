package services

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRequireChild is the child half of TestRequireFailsUnderCIAndSkipsElsewhere.
func TestRequireChild(t *testing.T) {
	addr := os.Getenv("SERVICES_DOWN_ADDR")
	if addr == "" {
		t.Skip("run by TestRequireFailsUnderCIAndSkipsElsewhere")
	}
	require(t, "nothing", addr, 100*time.Millisecond)
	t.Log("reached")
}

// "Under CI=true a test whose service is down FAILS, it never skips."
func TestRequireFailsUnderCIAndSkipsElsewhere(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	_ = l.Close() // nothing listens there now
	run := func(ci string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRequireChild$", "-test.v")
		cmd.Env = append(os.Environ(), "SERVICES_DOWN_ADDR="+down, "CI="+ci)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("true")
	if err == nil || !strings.Contains(out, "--- FAIL: TestRequireChild") {
		t.Fatalf("CI=true with the service down: want a failure, got err=%v:\n%s", err, out)
	}
	out, err = run("")
	if err != nil || !strings.Contains(out, "--- SKIP: TestRequireChild") {
		t.Fatalf("outside CI with the service down: want a skip, got err=%v:\n%s", err, out)
	}
}

func TestRequirePassesAListeningService(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	Require(t, "listener", l.Addr().String())
}
