package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// configKeys walks the config tree's yaml tags and returns every key path a file can set,
// map keys written <*> (sources.<*>.tenant) and list entries as their element's keys.
func configKeys() []string {
	var keys []string
	var walk func(t reflect.Type, path string, depth int)
	walk = func(t reflect.Type, path string, depth int) {
		if depth > 10 {
			return
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t == reflect.TypeFor[SinkSpec]():
			// A sink entry is type and ordered plus its sink's free-form options (decodeNode).
			keys = append(keys, path+".type", path+".ordered")
			return
		case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && isStruct(t.Elem()):
			walk(t.Elem(), path+".<*>", depth+1)
			return
		case t.Kind() == reflect.Slice && isStruct(t.Elem()):
			walk(t.Elem(), path, depth+1)
			return
		case t.Kind() != reflect.Struct:
			keys = append(keys, path)
			return
		}
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			walk(f.Type, p, depth+1)
		}
	}
	walk(reflect.TypeFor[Config](), "", 0)
	return keys
}

func isStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

// docRow is one row of the key table in docs/configuration.md: the keys its first cell
// names (expanded) and the text of its default and notes cells.
type docRow struct {
	keys  []string
	notes string
}

var (
	backticked  = regexp.MustCompile("`([^`]+)`")
	placeholder = regexp.MustCompile(`<[^>]+>`)
	identifier  = regexp.MustCompile(`[a-z0-9_]+(?:\.\*)?`)
	alias       = regexp.MustCompile("\\(alias `([^`]+)`\\)")
)

// docRows reads the key table. A key cell may name siblings the way the table writes them:
// "`a.b` / `c`" (a.b, a.c), "`a.b_bytes` / `_records`" (a.b_bytes, a.b_records),
// "`a.{b,c}`" (a.b, a.c) and "(alias `x`)" (x as written).
func docRows(t *testing.T) []docRow {
	raw, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []docRow
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		var keys []string
		keyCell := cells[0]
		if m := alias.FindStringSubmatch(keyCell); m != nil {
			keys = append(keys, m[1])
			keyCell = strings.Replace(keyCell, m[0], "", 1)
		}
		prev := ""
		for _, m := range backticked.FindAllStringSubmatch(keyCell, -1) {
			k := placeholder.ReplaceAllString(m[1], "<*>")
			switch {
			case strings.HasPrefix(k, "_") && prev != "":
				dot := strings.LastIndex(prev, ".")
				leaf := prev[dot+1:]
				if u := strings.LastIndex(leaf, "_"); u > 0 {
					k = prev[:dot+1] + leaf[:u] + k
				}
			case !strings.Contains(k, ".") && strings.Contains(prev, "."):
				k = prev[:strings.LastIndex(prev, ".")+1] + k
			}
			if open := strings.Index(k, ".{"); open >= 0 && strings.HasSuffix(k, "}") {
				for _, leaf := range strings.Split(k[open+2:len(k)-1], ",") {
					keys = append(keys, k[:open+1]+strings.TrimSpace(leaf))
				}
			} else {
				keys = append(keys, k)
			}
			prev = k
		}
		// The default cell counts as notes: `{rate: 67108864, burst: 268435456}` names the keys.
		notes := strings.Join(cells[1:], " | ")
		rows = append(rows, docRow{keys: keys, notes: notes})
	}
	return rows
}

// documented reports whether key has a row of its own, or sits below a row's key whose
// default or notes name, in backticks, its remaining path's leaf (`backup.store` notes `root`) or its first part
// with ".*" (`s3.*`).
func documented(rows []docRow, key string) bool {
	for _, r := range rows {
		if slices.Contains(r.keys, key) {
			return true
		}
	}
	for _, r := range rows {
		for _, k := range r.keys {
			rest, ok := strings.CutPrefix(key, k+".")
			if !ok {
				continue
			}
			var named []string
			for _, m := range backticked.FindAllStringSubmatch(r.notes, -1) {
				named = append(named, identifier.FindAllString(m[1], -1)...)
			}
			parts := strings.Split(rest, ".")
			if slices.Contains(named, parts[len(parts)-1]) || slices.Contains(named, parts[0]+".*") {
				return true
			}
		}
	}
	return false
}

// Design (configuration): "docs/configuration.md: every key, default and env var; a test
// fails when a config key is undocumented".
func TestEveryConfigKeyIsDocumented(t *testing.T) {
	rows := docRows(t)
	if len(rows) < 50 {
		t.Fatalf("read %d key rows from docs/configuration.md: the table's shape changed", len(rows))
	}
	keys := configKeys()
	if len(keys) < 100 {
		t.Fatalf("walked %d keys: the walk is broken", len(keys))
	}
	for _, k := range keys {
		if !documented(rows, k) {
			t.Errorf("config key %s is not documented in docs/configuration.md", k)
		}
	}
	t.Logf("%d config keys, %d documentation rows", len(keys), len(rows))
}

// The check above can fail: a key nobody documented is reported, and the table's
// shorthand expands to the keys it names.
func TestDocumentedExpandsTheTableShorthand(t *testing.T) {
	rows := []docRow{
		{keys: []string{"a.b_bytes", "a.b_records"}},
		{keys: []string{"s.<*>.store"}, notes: "`type`, `s3.*`"},
	}
	for key, want := range map[string]bool{
		"a.b_records": true, "a.c": false, "s.<*>.store.type": true, "s.<*>.store.s3.bucket": true, "s.<*>.store.root": false,
	} {
		if got := documented(rows, key); got != want {
			t.Errorf("documented(%s) = %v, want %v", key, got, want)
		}
	}
}
