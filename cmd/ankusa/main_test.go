package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ankusa.yml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Inventory B.1: "Any failure: stderr `ankusa: invalid configuration …`, exit 78 (EX_CONFIG)",
// with each problem naming its dotted key path.
func TestBadConfigExits78NamingKeyPaths(t *testing.T) {
	p := writeConfig(t, "http:\n  port: 99999\nbatcher:\n  max_batch: 0\n  surprise: 1\nsources:\n  s:\n    sinks: []\n")
	for _, cmd := range []string{"serve", "check-config", "print-config"} {
		var out, errOut bytes.Buffer
		code := run([]string{cmd}, &out, &errOut, envOf(map[string]string{"ANKUSA_CONFIG": p}))
		if code != 78 {
			t.Fatalf("%s exited %d, want 78; stderr %s", cmd, code, errOut.String())
		}
		msg := errOut.String()
		for _, path := range []string{"http.port", "batcher.max_batch", "batcher.surprise", "sources.s.sinks"} {
			if !strings.Contains(msg, path) {
				t.Errorf("%s: stderr does not name %s: %s", cmd, path, msg)
			}
		}
		if !strings.HasPrefix(msg, "ankusa: ") {
			t.Errorf("stderr %q does not start with the program name", msg)
		}
	}
	var errOut bytes.Buffer
	if code := run([]string{"check-config"}, &bytes.Buffer{}, &errOut, envOf(map[string]string{"ANKUSA_CONFIG": p, "ANKUSA_HTTP_PORT": "x"})); code != 78 {
		t.Fatalf("bad env override exited %d", code)
	}
	if !strings.Contains(errOut.String(), "ANKUSA_HTTP_PORT") {
		t.Fatalf("bad env override not named: %s", errOut.String())
	}
}

func TestCheckConfigSummarises(t *testing.T) {
	p := writeConfig(t, "sources:\n  b:\n    sinks: [{type: log}]\n  a:\n    sinks: [{type: log}]\n")
	var out bytes.Buffer
	if code := run([]string{"check-config"}, &out, &bytes.Buffer{}, envOf(map[string]string{"ANKUSA_CONFIG": p})); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got := out.String(); got != "config OK: roles=[dispatch,edge,storage] sources=a,b wal=disk\n" {
		t.Fatalf("check-config printed %q", got)
	}
}

// print-config shows the effective config with secrets redacted.
func TestPrintConfigRedactsSecrets(t *testing.T) {
	p := writeConfig(t, "sources:\n  s:\n    sinks:\n      - type: http\n        url: https://user:hunter2@hooks.example.com/in?token=abc\n        secret: whsec_c2VjcmV0\n")
	var out bytes.Buffer
	if code := run([]string{"print-config"}, &out, &bytes.Buffer{}, envOf(map[string]string{"ANKUSA_CONFIG": p})); code != 0 {
		t.Fatalf("exit %d", code)
	}
	s := out.String()
	for _, secret := range []string{"hunter2", "whsec_c2VjcmV0", "abc"} {
		if strings.Contains(s, secret) {
			t.Fatalf("print-config leaks %q:\n%s", secret, s)
		}
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || !strings.Contains(s, "hooks.example.com") {
		t.Fatalf("print-config output is not the redacted config: %v\n%s", err, s)
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, &bytes.Buffer{}, envOf(nil)); code != 0 || !strings.HasPrefix(out.String(), "ankusa ") {
		t.Fatalf("version: %d %q", code, out.String())
	}
}
