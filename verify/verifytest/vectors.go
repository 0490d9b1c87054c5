// Package verifytest reads the provider examples of verify/testdata/providers, for the tests of package
// verify and of the edge. Each file names its source in its comment lines (#); the other lines are
// "key: value": secret, public_key, public_url, query, body, header (Name=value, repeated) and now (the
// unix time the example was signed at, for a timestamped scheme).
package verifytest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Vector is one provider example.
type Vector struct {
	// Name is the file name without .txt; Type the preset (the name up to its first '_').
	Name, Type                   string
	Secret, PublicKey, PublicURL string
	Query, Body                  string
	// Headers holds name, value pairs in file order.
	Headers []string
	// Now is when the example was signed; zero when the scheme has no timestamp.
	Now time.Time
}

// Stamped reports whether the example carries a timestamp.
func (v Vector) Stamped() bool { return !v.Now.IsZero() }

// Load reads every *.txt of dir.
func Load(dir string) ([]Vector, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("verifytest: no vectors in %s", dir)
	}
	out := make([]Vector, 0, len(files))
	for _, f := range files {
		v, err := read(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func read(file string) (Vector, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return Vector{}, err
	}
	v := Vector{Name: strings.TrimSuffix(filepath.Base(file), ".txt")}
	v.Type, _, _ = strings.Cut(v.Name, "_")
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, val, ok := strings.Cut(line, ": ")
		if !ok {
			return v, fmt.Errorf("verifytest: %s: bad line %q", file, line)
		}
		switch k {
		case "secret":
			v.Secret = val
		case "public_key":
			v.PublicKey = val
		case "public_url":
			v.PublicURL = val
		case "query":
			v.Query = val
		case "body":
			v.Body = val
		case "header":
			name, hv, _ := strings.Cut(val, "=")
			v.Headers = append(v.Headers, name, hv)
		case "now":
			sec, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return v, fmt.Errorf("verifytest: %s: now: %w", file, err)
			}
			v.Now = time.Unix(sec, 0)
		default:
			return v, fmt.Errorf("verifytest: %s: unknown key %q", file, k)
		}
	}
	return v, sc.Err()
}
