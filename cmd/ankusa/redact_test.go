package main

import (
	"bytes"
	"strings"
	"testing"
)

// Issue 8 item 10: print-config never shows a token carried in a sink URL's path (Slack style), nor the path
// of a sink marked secret_path.
func TestPrintConfigRedactsSinkPathSecrets(t *testing.T) {
	p := writeConfig(t, "sources:\n  s:\n    sinks:\n"+
		"      - type: http\n        url: https://hooks.slack.com/services/T0001/B0001/xoxbS3cr3tT0k3nAbCdEf0123\n"+
		"      - type: http\n        url: https://hooks.zapier.com/hooks/catch/123/abc1234/\n        secret_path: true\n")
	var out bytes.Buffer
	if code := run([]string{"print-config"}, &out, &bytes.Buffer{}, envOf(map[string]string{"ANKUSA_CONFIG": p})); code != 0 {
		t.Fatalf("exit %d", code)
	}
	s := out.String()
	for _, secret := range []string{"xoxbS3cr3tT0k3nAbCdEf0123", "abc1234"} {
		if strings.Contains(s, secret) {
			t.Fatalf("print-config leaks %q:\n%s", secret, s)
		}
	}
	if !strings.Contains(s, "hooks.slack.com/services/T0001/B0001/[REDACTED]") {
		t.Fatalf("print-config does not show the redacted URL:\n%s", s)
	}
}
