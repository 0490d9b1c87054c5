package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// interpolate expands ${VAR}, ${VAR:-default} and ${VAR:-} in every string scalar value of the tree (never
// in keys). It works on parsed nodes, not raw text, so YAML quoting is unaffected and an expanded value is
// never re-parsed as YAML structure or re-scanned for ${. A plain (unquoted, untagged) scalar is re-resolved
// after expansion, so `port: ${PORT}` is an integer while `port: "${PORT}"` stays a string. An expansion
// that yields "" is an explicit empty string, not null.
func interpolate(n *yaml.Node, path string, env func(string) (string, bool), ps *problems) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			interpolate(c, path, env, ps)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			interpolate(n.Content[i+1], join(path, n.Content[i].Value), env, ps)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			interpolate(c, index(path, i), env, ps)
		}
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" || !strings.Contains(n.Value, "${") {
			return
		}
		v, ok := expand(n.Value, path, env, ps)
		if !ok {
			// Already reported: the key keeps its default rather than drawing a second problem.
			n.Kind, n.Tag, n.Value, n.Style = yaml.ScalarNode, "!!null", "", 0
			return
		}
		n.Value = v
		if n.Style == 0 {
			n.Tag = "" // re-resolve as YAML would have resolved the expanded text
			n.Tag = n.ShortTag()
			if v == "" {
				n.Tag = "!!str"
			}
		}
	case yaml.AliasNode:
		// The anchored node is expanded where it is defined; expanding it again through the alias would
		// report its problems twice.
	}
}

// expand substitutes the references in s. Problems name the key path and the variable, never the value.
func expand(s, path string, env func(string) (string, bool), ps *problems) (string, bool) {
	var b strings.Builder
	ok := true
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		rest := s[i+2:]
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			ps.add(path, "malformed interpolation: unterminated ${")
			return "", false
		}
		name, def, hasDef := strings.Cut(rest[:j], ":-")
		if !validVarName(name) || strings.Contains(def, "${") {
			ps.add(path, "malformed interpolation: want ${NAME}, ${NAME:-default} or ${NAME:-} with NAME in [A-Z0-9_]+")
			return "", false
		}
		v, set := env(name)
		switch {
		case hasDef && (!set || v == ""):
			v = def
		case !set:
			ps.add(path, "environment variable %s is not set", name)
			ok = false
		}
		b.WriteString(v)
		s = rest[j+1:]
	}
	return b.String(), ok
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
