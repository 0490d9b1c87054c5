package config

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/cases/*.json from the table tests")

// sharedCase is one config of a table test. cmd/ankusa's TestCheckConfigAndServeAgree runs
// every one through both check-config and serve, which must agree on it.
type sharedCase struct {
	Name string            `json:"name"`
	YAML string            `json:"yaml"`
	Env  map[string]string `json:"env,omitempty"`
}

// shareCases keeps testdata/cases/<table>.json equal to a table's configs, so the
// agreement test reads the tables as they are: a table changed without -update fails here.
func shareCases(t *testing.T, table string, cases []sharedCase) {
	t.Helper()
	sort.SliceStable(cases, func(a, b int) bool { return cases[a].Name < cases[b].Name })
	want, err := json.MarshalIndent(cases, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	path := filepath.Join("testdata", "cases", table+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s does not hold this table's configs (%v): go test ./config -run %s -update", path, err, t.Name())
	}
}
