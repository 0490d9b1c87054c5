package telemetry

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Issue: "Logs on a terminal are human-readable (zerolog's console writer when stderr is a
// TTY, JSON otherwise, and a log.format key to force either)".
func TestLogFormatJSONUnlessConsoleOrATerminal(t *testing.T) {
	line := func(format string) string {
		var buf bytes.Buffer
		log := NewLogger("info", format, &buf)
		log.Info().Str("source_id", "gh").Msg("hook stored")
		return buf.String()
	}
	for _, format := range []string{"json", "auto"} { // a buffer is no terminal: auto is JSON
		var m map[string]any
		if err := json.Unmarshal([]byte(line(format)), &m); err != nil {
			t.Fatalf("%s: not a JSON line: %v", format, err)
		}
		if m["level"] != "info" || m["message"] != "hook stored" || m["source_id"] != "gh" || m["time"] == nil {
			t.Fatalf("%s: fields %v", format, m)
		}
	}
	got := line("console")
	if json.Valid([]byte(got)) || !strings.Contains(got, "INF") || !strings.Contains(got, "hook stored") ||
		!strings.Contains(got, "source_id=gh") {
		t.Fatalf("console line %q, want zerolog's console format", got)
	}
	if strings.Contains(got, "\x1b[") {
		t.Fatalf("console line %q is coloured though its writer is no terminal", got)
	}
}

// auto decides by the writer: a pipe or a file is for a collector, a terminal for a person.
func TestIsTerminalTellsATerminalFromAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&bytes.Buffer{}) {
		t.Fatal("a pipe or a buffer taken for a terminal")
	}
	tty := openPTY(t)
	if !isTerminal(tty) {
		t.Fatal("a pseudo-terminal not taken for a terminal")
	}
}
