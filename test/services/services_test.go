package services

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRequireChild is the child half of TestRequireFailsUnderCI.
func TestRequireChild(t *testing.T) {
	addr := os.Getenv("SERVICES_ADDR")
	if addr == "" {
		t.Skip("run by TestRequireFailsUnderCI")
	}
	Require(t, "Nothing", addr)
}

// A missing service fails the test under CI=true and skips it otherwise; a listening one is returned.
func TestRequireFailsUnderCI(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := ln.Addr().String()
	if got := Require(t, "Listener", up); got != up {
		t.Fatalf("Require = %q", got)
	}
	_ = ln.Close() // the port is now (almost certainly) closed
	for ci, want := range map[string]string{"true": "--- FAIL: TestRequireChild", "": "--- SKIP: TestRequireChild"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRequireChild$", "-test.v")
		cmd.Env = append(os.Environ(), "SERVICES_ADDR="+up, "CI="+ci)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), want) || !strings.Contains(string(out), "Nothing is not reachable on "+up) {
			t.Fatalf("CI=%q: want %q:\n%s", ci, want, out)
		}
	}
}
