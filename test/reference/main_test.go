package reference

import (
	"testing"

	"go.uber.org/goleak"
)

// Start runs a writer and a server goroutine; Close must end both. fasthttp's
// process-wide Date refresher is started once per process by any fasthttp server and
// never stops; it is not the server's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"))
}
