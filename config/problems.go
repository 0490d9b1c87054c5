package config

import (
	"fmt"
	"slices"
	"strings"
)

// problems collects every problem of one load; nothing stops at the first.
type problems []Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// mustBe records a range problem in the inventory's form "must be <constraint>, got <value>".
func (ps *problems) mustBe(path, constraint string, got any) {
	ps.add(path, "must be %s, got %v", constraint, got)
}

// oneOf records a bad enum value.
func (ps *problems) oneOf(path string, allowed []string, got string) {
	ps.add(path, "must be one of %s, got %s", strings.Join(allowed, "|"), quote(got))
}

// asError returns nil when there is no problem, else an *Error sorted by path without duplicates.
// (It never returns a typed nil inside a non-nil error.)
func (ps problems) asError() error {
	if len(ps) == 0 {
		return nil
	}
	out := slices.Clone(ps)
	slices.SortStableFunc(out, func(a, b Problem) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Msg, b.Msg)
	})
	return &Error{Problems: slices.Compact(out)}
}

// join builds a dotted key path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}

// below returns the problems of ps that are not about a key already named in earlier (or a key under
// it): a value that could not be decoded kept its default, and a complaint about that default
// ("must list at least one sink" after "must be a list") would only be noise.
func (ps problems) below(earlier problems) problems {
	var out problems
	for _, p := range ps {
		covered := false
		for _, e := range earlier {
			if e.Path != "" && (p.Path == e.Path || strings.HasPrefix(p.Path, e.Path+".") || strings.HasPrefix(p.Path, e.Path+"[")) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}
