package test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/proctune"
)

var monitorTid = regexp.MustCompile(`"tid":(\d+),"slack":"([^"]+)"[^\n]*runtime monitor timer slack set`)

// TestBinarySetsTheRuntimeMonitorsTimerSlack: asked by ANKUSA_MONITOR_TIMER_SLACK=1ms, the binary gives the Go
// runtime's monitor thread a 1 ms timer slack at start and logs which thread it took; as root the thread's slack
// reads 1 ms and it belongs to the node's process. Without CAP_SYS_NICE the node logs why it could not and serves
// on.
func TestBinarySetsTheRuntimeMonitorsTimerSlack(t *testing.T) {
	t.Setenv(proctune.MonitorSlackEnv, "1ms")
	n := startNode(t, "monitor", t.TempDir())
	if os.Geteuid() != 0 {
		if !strings.Contains(n.log(), "runtime monitor timer slack left to the kernel") || !strings.Contains(n.log(), "CAP_SYS_NICE") {
			t.Fatalf("start log as uid %d does not say the slack was left for want of CAP_SYS_NICE:\n%s", os.Geteuid(), n.log())
		}
		return
	}
	m := monitorTid.FindStringSubmatch(n.log())
	if m == nil || m[2] != "1ms" {
		t.Fatalf("start log does not name the monitor thread and a 1ms slack:\n%s", n.log())
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(n.cmd.Process.Pid) + "/task/" + m[1]); err != nil {
		t.Fatalf("thread %s is not one of the node's (pid %d): %v", m[1], n.cmd.Process.Pid, err)
	}
	b, err := os.ReadFile("/proc/" + m[1] + "/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "1000000" {
		t.Fatalf("thread %s's timer slack = %s ns, want 1000000", m[1], got)
	}
}

// TestBinaryLeavesTheMonitorAloneByDefault: unset (or 0), ANKUSA_MONITOR_TIMER_SLACK leaves the kernel's slack,
// and the start log says so.
func TestBinaryLeavesTheMonitorAloneByDefault(t *testing.T) {
	t.Setenv(proctune.MonitorSlackEnv, "0") // as unset; the process running the tests may have it set
	n := startNode(t, "monitor-off", t.TempDir())
	if !strings.Contains(n.log(), "runtime monitor timer slack left to the kernel ("+proctune.MonitorSlackEnv+" unset or 0)") ||
		strings.Contains(n.log(), "runtime monitor timer slack set") {
		t.Fatalf("start log with %s=0:\n%s", proctune.MonitorSlackEnv, n.log())
	}
}
