package blob_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// The S3 store's HTTP connections and the fake S3 server run goroutines.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
