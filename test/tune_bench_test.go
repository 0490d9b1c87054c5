package test

import (
	"os"
	"sync"
	"testing"

	"github.com/ankusa-go/ankusa/proctune"
)

var tuneOnce sync.Once

// tuneLikeTheBinary gives this process's Go runtime monitor the timer slack the binary would give its own at
// start (cmd/ankusa tuneMonitor: none unless ANKUSA_MONITOR_TIMER_SLACK asks), so that a node a benchmark hosts in
// this process, and the references measured beside it, run as the binary would. As there, a slack the process
// may not set is reported and the benchmark goes on.
func tuneLikeTheBinary(b *testing.B) {
	tuneOnce.Do(func() {
		t, err := proctune.TuneMonitor(os.LookupEnv(proctune.MonitorSlackEnv))
		switch {
		case err != nil:
			b.Fatal(err)
		case t.Slack == 0:
			b.Logf("runtime monitor timer slack left to the kernel (%s unset or 0)", proctune.MonitorSlackEnv)
		case t.Refused != nil:
			b.Logf("runtime monitor timer slack left to the kernel: %v", t.Refused)
		default:
			b.Logf("runtime monitor (thread %d) timer slack %v, as the binary sets it", t.Tid, t.Slack)
		}
	})
}
