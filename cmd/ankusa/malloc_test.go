package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The binary limits glibc to two malloc arenas before any thread starts, unless the
// operator chose through MALLOC_ARENA_MAX or GLIBC_TUNABLES. The test binary carries the
// same constructor: it re-runs itself with each environment and reads what was chosen.
func TestMallocArenasLimitedUnlessTheEnvironmentChose(t *testing.T) {
	if os.Getenv("ANKUSA_ARENA_PROBE") == "1" {
		os.Stdout.WriteString(strconv.Itoa(mallocArenaMax()) + "\n")
		os.Exit(0)
	}
	for _, tc := range []struct {
		env  []string
		want int
	}{
		{nil, 2},
		{[]string{"MALLOC_ARENA_MAX=8"}, 0},
		{[]string{"GLIBC_TUNABLES=glibc.malloc.arena_max=4"}, 0},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMallocArenasLimitedUnlessTheEnvironmentChose$")
		cmd.Env = append(withoutMallocEnv(os.Environ()), append([]string{"ANKUSA_ARENA_PROBE=1"}, tc.env...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		got, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || got != tc.want {
			t.Errorf("env %v: arena limit set by the binary %q, want %d", tc.env, out, tc.want)
		}
	}
}

func withoutMallocEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "MALLOC_ARENA_MAX=") && !strings.HasPrefix(kv, "GLIBC_TUNABLES=") {
			out = append(out, kv)
		}
	}
	return out
}
