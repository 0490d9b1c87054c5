package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 13: "check-config validates all and refuses port or data-dir clashes" between the
// instances of one process.
func TestCheckConfigRefusesClashesBetweenInstances(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const src = "sources:\n  s:\n    sinks: [{type: log}]\n"
	a := write("a.yml", "instance: a\nnode: {data_dir: "+dir+"}\nhttp: {port: 4100}\nadmin: {port: 4101}\n"+src)
	b := write("b.yml", "instance: b\nnode: {data_dir: "+dir+"}\nhttp: {port: 4200}\nadmin: {port: 4201}\n"+src)
	f := func(want int, wantOut string, wantErr []string, args ...string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(append([]string{"check-config"}, args...), &out, &errOut, envOf(nil))
		if code != want {
			t.Fatalf("check-config %v exited %d, want %d; stderr %s", args, code, want, errOut.String())
		}
		if wantOut != "" && out.String() != wantOut {
			t.Fatalf("check-config %v printed %q, want %q", args, out.String(), wantOut)
		}
		for _, w := range wantErr {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("check-config %v: stderr does not say %q: %s", args, w, errOut.String())
			}
		}
	}
	both := "config OK: instance=a roles=[dispatch,edge,storage] sources=s wal=disk\n" +
		"config OK: instance=b roles=[dispatch,edge,storage] sources=s wal=disk\n"
	f(0, both, nil, "-c", a, "--config", b)

	// A directory is its *.yml files in name order; a file that is not one is left out.
	confDir := filepath.Join(dir, "conf")
	if err := os.Mkdir(confDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{b, a} {
		data, _ := os.ReadFile(p)
		if err := os.WriteFile(filepath.Join(confDir, filepath.Base(p)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(confDir, "notes.txt"), []byte("not a config"), 0o600); err != nil {
		t.Fatal(err)
	}
	f(0, both, nil, "-c", confDir)
	f(78, "", []string{"holds no *.yml"}, "-c", t.TempDir())

	// The same port on a wildcard and on a loopback address clashes; port 0 never does.
	c := write("c.yml", "instance: c\nnode: {data_dir: "+dir+"}\nhttp: {ip: 127.0.0.1, port: 4200}\nadmin: {port: 0}\n"+src)
	f(78, "", []string{"http.port: c (" + c + ") listens on 127.0.0.1:4200, taken by b (" + b + ") http.port"}, "-c", b, "-c", c)
	d := write("d.yml", "instance: d\nnode: {data_dir: "+dir+"}\nhttp: {port: 4300}\nadmin: {port: 0}\n"+src)
	e := write("e.yml", "instance: e\nnode: {data_dir: "+dir+"}\nhttp: {port: 4400}\nadmin: {port: 0}\n"+src)
	f(0, "", nil, "-c", d, "-c", e)

	// The same instance in the same data dir is one RocksDB lock: refused, and so is the name.
	a2 := write("a2.yml", "instance: a\nnode: {data_dir: "+dir+"/.}\nhttp: {port: 4500}\nadmin: {port: 4501}\n"+src)
	f(78, "", []string{"node.data_dir:", `instance "a" is named by`}, "-c", a, "-c", a2)
}
