package routes

import (
	"errors"
	"testing"
)

// Inventory A.6: "Patterns: literal, :name (one segment), trailing * (one or more). %2F and ./.. segments are
// rejections."
func TestPatternGrammar(t *testing.T) {
	match := func(pattern string, yes, no []string) {
		t.Helper()
		p, err := ParsePattern(pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", pattern, err)
		}
		for _, path := range yes {
			if !p.Match(path) {
				t.Errorf("%q does not match %q", pattern, path)
			}
		}
		for _, path := range no {
			if p.Match(path) {
				t.Errorf("%q matches %q", pattern, path)
			}
		}
	}
	match("/", []string{"/"}, []string{"/a", ""})
	match("/webhooks/github", []string{"/webhooks/github"},
		[]string{"/webhooks/github/", "/webhooks/gitlab", "/webhooks", "/webhooks/github/x", "/Webhooks/github"})
	match("/hooks/:source", []string{"/hooks/a", "/hooks/stripe-1"},
		[]string{"/hooks", "/hooks/", "/hooks//", "/hooks/a/b"})
	match("/hooks/:tenant/:source", []string{"/hooks/t/s"}, []string{"/hooks/t", "/hooks/t/s/x"})
	match("/catch/*", []string{"/catch/a", "/catch/a/b/c"}, []string{"/catch", "/catch/", "/catch//a"})
	match("/a%20b/x", []string{"/a b/x"}, []string{"/a%20b/x"})
	match("/v1/a:b@c", []string{"/v1/a:b@c"}, nil)

	refused := map[string]string{
		"":                               "empty",
		"hooks":                          "no leading slash",
		"/hooks/":                        "trailing slash",
		"/a//b":                          "empty segment",
		"/a/%2F/b":                       "encoded slash",
		"/a/%2fb":                        "encoded slash, lower case",
		"/a/./b":                         "dot segment",
		"/a/../b":                        "dot-dot segment",
		"/a/%2e%2E/b":                    "encoded dot-dot",
		"/a/%2e":                         "encoded dot",
		"/a/*/b":                         "tail not last",
		"/a/b*":                          "star inside a literal",
		"/a/:":                           "unnamed parameter",
		"/a/:1x":                         "parameter name starting with a digit",
		"/a/:x/:x":                       "parameter named twice",
		"/a/%zz":                         "bad escape",
		"/a/%0a":                         "encoded control byte",
		"/a/b?c":                         "query byte",
		"/a/b#c":                         "fragment byte",
		"/a/ b":                          "space",
		"/a/\xff":                        "non-ASCII",
		"/" + string(make([]byte, 1024)): "too long",
	}
	for in, why := range refused {
		_, err := ParsePattern(in)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "path" {
			t.Errorf("ParsePattern(%q) (%s) = %v, want a path FieldError", in, why, err)
		}
	}
}

func TestPatternShapeIgnoresParameterNames(t *testing.T) {
	a, _ := ParsePattern("/h/:x/*")
	b, _ := ParsePattern("/h/:y/*")
	c, _ := ParsePattern("/h/%3Ay/*") // a literal ":y", not a parameter
	if a.shape() != b.shape() {
		t.Errorf("shapes differ: %q %q", a.shape(), b.shape())
	}
	if a.shape() == c.shape() {
		t.Errorf("an encoded ':' literal has a parameter's shape")
	}
}
