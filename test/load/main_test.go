package load

import (
	"testing"

	"go.uber.org/goleak"
)

// Run starts a goroutine per worker and a watcher; none may outlive it. fasthttp's
// server keeps one process-wide goroutine refreshing its Date header once started;
// it belongs to the test target, not to the driver.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"))
}
