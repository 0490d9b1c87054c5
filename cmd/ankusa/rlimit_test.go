package main

import (
	"syscall"
	"testing"
)

// TestRaiseFileLimitLiftsSoftToHard: serve starts with the open-files soft limit at the
// hard limit, so a burst of connections does not exhaust descriptors (issue 8, item 1).
func TestRaiseFileLimitLiftsSoftToHard(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max <= 256 {
		t.Skipf("hard limit %d leaves nothing to raise", lim.Max)
	}
	low := syscall.Rlimit{Cur: 256, Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })
	soft, hard, err := raiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	if soft != lim.Max || hard != lim.Max {
		t.Fatalf("after raise: soft %d hard %d, want both %d", soft, hard, lim.Max)
	}
}
