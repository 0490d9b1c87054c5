package proctune

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
