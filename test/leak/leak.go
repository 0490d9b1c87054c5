// Package leak is the TestMain of every package whose code starts goroutines: once the
// tests passed, no goroutine may be left but the runtime's and the test runner's.
//
// It adds one thing to goleak.VerifyTestMain: a deadline instead of goleak's half a
// second of retries. fasthttp's worker pool cleans idle workers from a goroutine that
// sleeps max_idle_worker_duration (10 s) between looks at its stop channel; a stopped
// server's cleaner therefore ends up to 10 s after the server, and nothing outside
// fasthttp can wake it. Waiting for it keeps the check whole (no goroutine is ignored),
// and a real leak still fails, only later.
package leak

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ankusa-go/ankusa/test/poll"
)

// Within is how long goroutines may take to end after the last test: fasthttp's idle
// worker cleaner sleeps 10 s between looks at its stop channel.
const Within = 15 * time.Second

// VerifyTestMain runs the tests and, if they passed, fails the binary while a goroutine
// the tests started is still running after Within. opts (goleak.IgnoreTopFunction and the
// like) name goroutines a client library leaves by design; each caller says why.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) { os.Exit(Check(m.Run(), opts...)) }

// Check is VerifyTestMain for a TestMain with its own set-up and tear-down: given the
// tests' exit code, it returns it, or 1 when they passed but a goroutine is still
// running after Within. opts are passed to goleak.Find.
func Check(code int, opts ...goleak.Option) int {
	if code != 0 {
		return code
	}
	opts = append(libraryGoroutines(), opts...)
	if err := poll.Wait(Within, func() error { return goleak.Find(opts...) }); err != nil {
		fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests passed: %v\n", err)
		return 1
	}
	return 0
}

// libraryGoroutines names the goroutines a linked library starts for the life of the
// process, which no test can stop and no shutdown waits for:
//
//   - go.opencensus.io/stats/view starts its worker in the package's init. The Pub/Sub
//     client (sinks/pubsubsink) still records OpenCensus tags, so every binary that links
//     the shipped sinks (through sinks/builtin) runs it.
func libraryGoroutines() []goleak.Option {
	return []goleak.Option{goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start")}
}
