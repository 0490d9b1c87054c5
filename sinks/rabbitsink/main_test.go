package rabbitsink

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// The connection loop and each session's returns goroutine end with Close.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
