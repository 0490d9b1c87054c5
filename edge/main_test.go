package edge_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// Every instance a test starts stops when the test ends: its listener, batchers, pen
// writer, limiter actor and the rest leave no goroutine behind.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
