package main

import (
	"testing"

	"github.com/ankusa-go/ankusa/test/leak"
)

// run and serve start goroutines (the instance, the second-signal watcher): none may
// outlive the command.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }
