// Package capture holds what a test collects from the goroutines it starts: a log
// destination they write while the test reads it.
package capture

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer safe for concurrent writers and a concurrent reader: a
// zerolog destination for an instance's or an actor system's lines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (c *Buffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

// String is everything written so far.
func (c *Buffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// Lines decodes every JSON line written so far; it fails the test on a line that is
// not JSON (call it from the test goroutine).
func (c *Buffer) Lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(c.String()) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}
