package config

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// The strict walk decodes the node tree onto a typed value, driven by reflection over yaml tags, and
// records a problem for every unknown key, wrong type and malformed entry instead of stopping at the
// first. A key absent from the file, or set to null, keeps the value already there (the default).

const (
	// maxNodes bounds the work of one walk: aliases and merge keys let a few hundred bytes name billions
	// of nodes. A real configuration has a few thousand.
	maxNodes = 200_000
	// maxDepth bounds nesting, which only free-form sink options can reach.
	maxDepth = 100
)

// nodeDecoder is implemented by types whose YAML shape is not a plain struct (SinkSpec, DedupeSpec). It
// is preferred to yaml.Unmarshaler, which the walk honours for types of other packages.
type nodeDecoder interface {
	decodeNode(w *walker, n *yaml.Node, path string, depth int)
}

// defaulter is implemented by map and list element types that have per-entry defaults (Source).
type defaulter interface {
	applyDefaults()
}

type walker struct {
	ps     *problems
	budget int
	// active holds the alias targets being decoded, so an anchor that contains an alias to itself is a
	// problem instead of an endless walk.
	active map[*yaml.Node]bool
	halted bool
}

func newWalker(ps *problems) *walker {
	return &walker{ps: ps, budget: maxNodes, active: map[*yaml.Node]bool{}}
}

// charge takes n nodes from the budget and reports whether the walk may go on.
func (w *walker) charge(n int) bool {
	if w.halted {
		return false
	}
	w.budget -= n
	if w.budget < 0 {
		w.halted = true
		w.ps.add("", "document too large: more than %d nodes after alias expansion", maxNodes)
		return false
	}
	return true
}

// enter charges one node and checks the nesting depth.
func (w *walker) enter(path string, depth int) bool {
	if !w.charge(1) {
		return false
	}
	if depth > maxDepth {
		w.ps.add(path, "nested deeper than %d levels", maxDepth)
		return false
	}
	return true
}

// deref follows aliases and marks the collection it returns as being decoded, so that an alias back to
// it (an anchor containing itself) is a problem instead of an endless walk. The caller must call
// release with what deref returned.
func (w *walker) deref(n *yaml.Node, path string) (target *yaml.Node, marked, ok bool) {
	t := n
	for t != nil && t.Kind == yaml.AliasNode {
		t = t.Alias
	}
	if t == nil || w.active[t] {
		w.ps.add(path, "alias *%s refers to itself", n.Value)
		return nil, false, false
	}
	if t.Kind == yaml.MappingNode || t.Kind == yaml.SequenceNode {
		w.active[t] = true
		return t, true, true
	}
	return t, false, true
}

func (w *walker) release(n *yaml.Node, marked bool) {
	if marked {
		delete(w.active, n)
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// decode decodes n onto v (addressable). secret keeps scalar values out of problem messages.
func (w *walker) decode(n *yaml.Node, v reflect.Value, path string, secret bool, depth int) {
	if !w.enter(path, depth) {
		return
	}
	n, marked, ok := w.deref(n, path)
	if !ok {
		return
	}
	defer w.release(n, marked)
	if isNull(n) {
		return
	}
	w.decodeInto(n, v, path, secret, depth)
}

// decodeInto decodes a non-null, dereferenced node onto v.
func (w *walker) decodeInto(n *yaml.Node, v reflect.Value, path string, secret bool, depth int) {
	if d, ok := v.Addr().Interface().(nodeDecoder); ok {
		d.decodeNode(w, n, path, depth)
		return
	}
	if u, ok := v.Addr().Interface().(yaml.Unmarshaler); ok {
		w.unmarshal(u, n, path)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		w.decodeStruct(n, v, path, secret, depth)
	case reflect.Map:
		w.decodeMap(n, v, path, secret, depth)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.typeErr(path, "a list", n, secret)
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			e := s.Index(i)
			if d, ok := e.Addr().Interface().(defaulter); ok {
				d.applyDefaults()
			}
			w.decode(c, e, index(path, i), secret, depth+1)
		}
		v.Set(s)
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		if !v.IsNil() {
			e.Elem().Set(v.Elem())
		}
		w.decodeInto(n, e.Elem(), path, secret, depth)
		v.Set(e)
	case reflect.Interface:
		if g := w.generic(n, path, depth); g != nil {
			v.Set(reflect.ValueOf(g))
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			w.typeErr(path, "a string", n, secret)
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			w.typeErr(path, "a boolean", n, secret)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := scalarInt(n)
		if !ok || v.OverflowInt(i) {
			w.typeErr(path, "an integer", n, secret)
			return
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") || n.Decode(&f) != nil {
			w.typeErr(path, "a number", n, secret)
			return
		}
		v.SetFloat(f)
	default:
		// A Config field of a kind the walk does not know is a programming error, reported rather than
		// panicking so that a bad build still names the key.
		w.ps.add(path, "cannot decode into %s", v.Type())
	}
}

// unmarshal hands n to a type that decodes itself (verify.Secrets: one secret or a rotation list). Its
// error becomes the key's problem; an *Error (this package's decoders) keeps its relative paths. The type
// is trusted not to put a secret's value in its error: verify.Secrets reports only positions.
func (w *walker) unmarshal(u yaml.Unmarshaler, n *yaml.Node, path string) {
	// The type walks n itself; charge its direct children so a huge list still spends the budget.
	if !w.charge(len(n.Content)) {
		return
	}
	err := u.UnmarshalYAML(n)
	if err == nil {
		return
	}
	var ce *Error
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			w.ps.add(subPath(path, p.Path), "%s", p.Msg)
		}
		return
	}
	w.ps.add(path, "%s", err.Error())
}

// scalarInt accepts YAML integers (8_000_000, 0x10) and floats that are exact integers (8e6).
func scalarInt(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false
	}
	switch n.ShortTag() {
	case "!!int":
		var i int64
		if n.Decode(&i) != nil {
			return 0, false
		}
		return i, true
	case "!!float":
		var f float64
		if n.Decode(&f) != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

type field struct {
	index int
	// secret: redacted by Redacted and never echoed in a problem (`config:"secret"`).
	secret bool
	// noecho: never echoed in a problem, but printed by Redacted (`config:"noecho"`, a subtree that holds
	// secrets among other things and redacts them itself).
	noecho bool
}

// fields maps the yaml names of t's exported fields to their index. It is recomputed per struct visit:
// configs are loaded rarely, and a cache would be package-level mutable state.
func fields(t reflect.Type) map[string]field {
	m := make(map[string]field, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		tag := f.Tag.Get("config")
		m[name] = field{index: i, secret: tag == "secret", noecho: tag == "secret" || tag == "noecho"}
	}
	return m
}

func (w *walker) decodeStruct(n *yaml.Node, v reflect.Value, path string, secret bool, depth int) {
	if n.Kind != yaml.MappingNode {
		w.typeErr(path, "a mapping", n, secret)
		return
	}
	fs := fields(v.Type())
	for _, p := range w.pairs(n, path, depth) {
		key := p.key.Value
		f, ok := fs[key]
		if !ok {
			w.ps.add(join(path, key), "unknown key")
			continue
		}
		w.decode(p.val, v.Field(f.index), join(path, key), secret || f.noecho, depth+1)
	}
}

func (w *walker) decodeMap(n *yaml.Node, v reflect.Value, path string, secret bool, depth int) {
	if n.Kind != yaml.MappingNode {
		w.typeErr(path, "a mapping", n, secret)
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		w.ps.add(path, "cannot decode into %s", v.Type())
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	et := v.Type().Elem()
	for _, p := range w.pairs(n, path, depth) {
		k := reflect.ValueOf(p.key.Value).Convert(v.Type().Key())
		e := reflect.New(et).Elem()
		if old := v.MapIndex(k); old.IsValid() {
			e.Set(old)
		} else if d, ok := e.Addr().Interface().(defaulter); ok {
			d.applyDefaults()
		}
		w.decode(p.val, e, join(path, p.key.Value), secret, depth+1)
		v.SetMapIndex(k, e)
	}
}

type pair struct{ key, val *yaml.Node }

// pairs returns the entries of a mapping with YAML merge keys (<<) applied: explicit keys win over merged
// ones, and among merged mappings the first wins. A key written twice is a problem; non-string keys are
// problems and dropped.
func (w *walker) pairs(n *yaml.Node, path string, depth int) []pair {
	if !w.charge(len(n.Content) / 2) {
		return nil
	}
	out := make([]pair, 0, len(n.Content)/2)
	seen := make(map[string]bool, len(n.Content)/2)
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, w.mergePairs(val, join(path, "<<"), depth)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			w.ps.add(path, "keys must be strings, got %s", describe(k, true))
			continue
		}
		if seen[k.Value] {
			w.ps.add(join(path, k.Value), "duplicate key")
			continue
		}
		seen[k.Value] = true
		out = append(out, pair{k, val})
	}
	for _, p := range merged {
		if !seen[p.key.Value] {
			seen[p.key.Value] = true
			out = append(out, p)
		}
	}
	return out
}

func (w *walker) mergePairs(n *yaml.Node, path string, depth int) []pair {
	if !w.enter(path, depth) {
		return nil
	}
	n, marked, ok := w.deref(n, path)
	if !ok {
		return nil
	}
	defer w.release(n, marked)
	switch n.Kind {
	case yaml.MappingNode:
		return w.pairs(n, path, depth+1)
	case yaml.SequenceNode:
		var out []pair
		for _, c := range n.Content {
			c, marked, ok := w.deref(c, path)
			if !ok {
				continue
			}
			if c.Kind != yaml.MappingNode {
				w.ps.add(path, "merge value must be a mapping or a list of mappings")
			} else {
				out = append(out, w.pairs(c, path, depth+1)...)
			}
			w.release(c, marked)
		}
		return out
	}
	w.ps.add(path, "merge value must be a mapping or a list of mappings")
	return nil
}

// generic decodes free-form values (sink options) into nil, bool, int, float64, string, []any and
// map[string]any. Scalars of other tags (timestamps, binary, custom tags) are kept as their text.
func (w *walker) generic(n *yaml.Node, path string, depth int) any {
	if !w.enter(path, depth) {
		return nil
	}
	n, marked, ok := w.deref(n, path)
	if !ok {
		return nil
	}
	defer w.release(n, marked)
	switch n.Kind {
	case yaml.MappingNode:
		ps := w.pairs(n, path, depth)
		m := make(map[string]any, len(ps))
		for _, p := range ps {
			m[p.key.Value] = w.generic(p.val, join(path, p.key.Value), depth+1)
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, c := range n.Content {
			l[i] = w.generic(c, index(path, i), depth+1)
		}
		return l
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				return b
			}
		case "!!int":
			var i int
			if n.Decode(&i) == nil {
				return i
			}
		case "!!float":
			var f float64
			if n.Decode(&f) == nil {
				return f
			}
		}
		return n.Value
	}
	return nil
}

// decodeNode reads one sinks entry: type and ordered are typed, every other key is kept in Options for
// the sink package. Option values are secret-bearing, so no problem here ever echoes one.
func (s *SinkSpec) decodeNode(w *walker, n *yaml.Node, path string, depth int) {
	if n.Kind != yaml.MappingNode {
		w.typeErr(path, "a mapping", n, true)
		return
	}
	*s = SinkSpec{Options: map[string]any{}}
	for _, p := range w.pairs(n, path, depth) {
		key := p.key.Value
		switch key {
		case "type":
			w.decode(p.val, reflect.ValueOf(&s.Type).Elem(), join(path, key), true, depth+1)
		case "ordered":
			w.decode(p.val, reflect.ValueOf(&s.Ordered).Elem(), join(path, key), true, depth+1)
		default:
			s.Options[key] = w.generic(p.val, join(path, key), depth+1)
		}
	}
}

func (w *walker) typeErr(path, want string, n *yaml.Node, secret bool) {
	w.ps.add(path, "must be %s, got %s", want, describe(n, secret))
}

// describe names what a node holds: its kind for collections and secrets, else its (shortened) value.
func describe(n *yaml.Node, secret bool) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	tag := n.ShortTag()
	if secret {
		switch tag {
		case "!!str":
			return "a string"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		}
		return "a value tagged " + tag
	}
	if tag == "!!str" || !utf8.ValidString(n.Value) || utf8.RuneCountInString(n.Value) > 64 {
		return quote(n.Value)
	}
	return n.Value
}
