package deploy_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// The tests start whole instances; once they stopped, none of their goroutines may be left.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
