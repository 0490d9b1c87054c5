package claimcheck

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// The gateway's HTTP servers and the S3 client's connections run goroutines.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
