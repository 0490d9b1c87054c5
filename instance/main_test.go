package instance_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// An instance owns every goroutine it starts (gauges, sweepers, listeners, the admin
// server, the dispatch scheduler): once it stopped, none may be left.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
