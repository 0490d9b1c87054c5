package config

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse: Parse never panics and never hangs; what it accepts validates and prints, what it refuses is
// an *Error whose every problem says something.
func FuzzParse(f *testing.F) {
	f.Add(defaultYAML)
	for _, s := range []string{
		"", "~", "- a", "instance: ${INST}", "http: {port: ${P}}", "node: {data_dir: '${D:-x}'}",
		"sources: {gh: {sinks: [{type: http, url: 'https://u:p@h/x?t=1', x: &a [1, *a]}]}}",
		"http: {<<: {port: 1}}", "a: &a {<<: *a}", "wal: {type: none}\n" + okSource,
		"max_body_bytes: 1e6", "batcher: {partitions: 0x10}", "{? [a]: b}", "sources: {gh: {sinks: [~]}}",
	} {
		f.Add([]byte(s))
	}
	env := envOf(map[string]string{"INST": "x", "P": "4000", "D": "", "ANKUSA_ROLES": "edge"})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, env)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("refusal %v is not a non-empty *Error", err)
			}
			for _, p := range ce.Problems {
				if p.Msg == "" {
					t.Fatalf("problem at %q without a message", p.Path)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		if _, err := json.Marshal(c.Redacted()); err != nil {
			t.Fatalf("Redacted() is not printable: %v", err)
		}
	})
}
