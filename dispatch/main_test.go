package dispatch

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// The scheduler's wake-ups and attempts, the replayer's ticker, the lanes and every
// instance the tests start leave no goroutine behind.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
