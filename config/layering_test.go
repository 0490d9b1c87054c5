package config

import (
	"os/exec"
	"strings"
	"testing"
)

// TestConfigImportsNoRolePackage proves the layering rule of DESIGN.md §2: config depends on the standard
// library and leaf packages only, never on a role package (edge, dispatch, store, sinks, instance) or
// anything beneath one, so every role may import config without a cycle or a hidden coupling.
func TestConfigImportsNoRolePackage(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/ankusa-go/ankusa/"
	roles := []string{"edge", "dispatch", "store", "sinks", "instance", "storage", "intake", "admin"}
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			continue
		}
		for _, r := range roles {
			if rel == r || strings.HasPrefix(rel, r+"/") {
				t.Errorf("config depends on %s, a role package (or one beneath it)", pkg)
			}
		}
	}
}
