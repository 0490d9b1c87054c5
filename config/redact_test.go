package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// Issue 8 item 10: path tokens (Slack, Discord, Teams put the secret in the path) are redacted by a
// documented rule; secret_path: true redacts the whole path; readable path names stay.
func TestRedactURLHidesPathTokens(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T0001/B0001/xoxbS3cr3tT0k3nAbCdEf0123":       "https://hooks.slack.com/services/T0001/B0001/[REDACTED]",
		"https://discord.com/api/webhooks/123456789012345678/aB-cD_eF0123456789xyzXYZ": "https://discord.com/api/webhooks/123456789012345678/[REDACTED]",
		"https://sqs.eu-west-1.amazonaws.com/123456789012/orders-processing-queue":     "https://sqs.eu-west-1.amazonaws.com/123456789012/orders-processing-queue",
		"https://u:p@h.example.com/in/0123456789abcdef0123?token=t&v=1#frag":           "https://h.example.com/in/[REDACTED]?token=[REDACTED]&v=[REDACTED]",
		"http://h.example.com":            "http://h.example.com",
		"http://h.example.com/":           "http://h.example.com/",
		"k2:9092":                         "k2:9092",
		"a:b@k2:9092/AbCdEfGhIjKlMnOp123": "k2:9092/[REDACTED]",
	} {
		if got := RedactURL(in, false); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := RedactURL("https://hooks.zapier.com/hooks/catch/123/abc1234/?x=1", true); got != "https://hooks.zapier.com/[REDACTED]?x=[REDACTED]" {
		t.Errorf("secret_path: %q", got)
	}
}

// print-config (Config.Redacted) applies the path rule and honours secret_path.
func TestRedactedHidesSinkPathSecrets(t *testing.T) {
	c := mustParse(t, `
sources:
  s:
    sinks:
      - type: http
        url: "https://hooks.slack.com/services/T0001/B0001/xoxbS3cr3tT0k3nAbCdEf0123"
      - type: http
        url: "https://hooks.zapier.com/hooks/catch/123/abc1234/"
        secret_path: true
`, nil)
	out, err := json.Marshal(c.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"xoxbS3cr3tT0k3nAbCdEf0123", "abc1234"} {
		if strings.Contains(string(out), secret) {
			t.Fatalf("Redacted() leaks %q: %s", secret, out)
		}
	}
	if !strings.Contains(string(out), `"secret_path":true`) || !strings.Contains(string(out), "/services/T0001/B0001/[REDACTED]") {
		t.Fatalf("Redacted() = %s", out)
	}
}
