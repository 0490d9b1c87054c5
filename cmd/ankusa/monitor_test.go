package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/proctune"
)

func TestTuneMonitorRefusesAMalformedSlack(t *testing.T) {
	var out bytes.Buffer
	env := func(k string) (string, bool) {
		if k == proctune.MonitorSlackEnv {
			return "fast", true
		}
		return "", false
	}
	err := tuneMonitor(zerolog.New(&out), env)
	if err == nil || !strings.Contains(err.Error(), proctune.MonitorSlackEnv) {
		t.Fatalf("tuneMonitor with %s=fast = %v, want an error naming the variable", proctune.MonitorSlackEnv, err)
	}
	if out.Len() != 0 {
		t.Fatalf("a refused setting logged %q", out.String())
	}
}
