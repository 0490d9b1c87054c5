package kafkasink

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// Every client and every kfake cluster the tests start is closed: no goroutine of either outlives them.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
