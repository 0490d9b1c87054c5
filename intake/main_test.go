package intake_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
