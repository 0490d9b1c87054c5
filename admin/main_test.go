package admin_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// The admin listener's serving goroutine belongs to its actor: once the instances a test started stopped, none
// may be left.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
