package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// defaultYAML is the configuration used when no file is found: one sample source with a log sink.
//
//go:embed default.yml
var defaultYAML []byte

// LocalFile is the file Resolve reads when ANKUSA_CONFIG is not set.
const LocalFile = "./ankusa.yml"

// Load reads the configuration file at path. A file that cannot be read is an error wrapping the
// os error (errors.Is(err, fs.ErrNotExist) holds for a missing file); a file that is refused is an
// error wrapping *Error (errors.Is(err, ErrInvalid)). env is the environment lookup (os.LookupEnv in
// the binary; nil means an empty environment).
func Load(path string, env func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: cannot read %s: %w", path, err)
	}
	c, err := Parse(data, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.File = path
	return c, nil
}

// Resolve finds the binary's configuration: the file named by ANKUSA_CONFIG (which must exist), else
// ./ankusa.yml, else the embedded default (Embedded=true, with a warning).
func Resolve(env func(string) (string, bool)) (*Config, error) {
	if env == nil {
		env = noEnv
	}
	if p, ok := env("ANKUSA_CONFIG"); ok && p != "" {
		return Load(p, env)
	}
	_, err := os.Stat(LocalFile)
	if err == nil {
		return Load(LocalFile, env)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("config: cannot read %s: %w", LocalFile, err)
	}
	c, err := Parse(defaultYAML, env)
	if err != nil {
		return nil, fmt.Errorf("embedded default configuration: %w", err)
	}
	c.Embedded = true
	c.Warnings = append([]string{
		"no configuration file (ANKUSA_CONFIG unset, " + LocalFile + " absent): running the embedded default configuration with its sample source",
	}, c.Warnings...)
	return c, nil
}

// Parse builds a configuration from YAML: parse → interpolate ${VAR} → strict walk onto Default() →
// ANKUSA_* env overrides → Validate. On any problem it returns nil and an *Error holding all of them.
func Parse(data []byte, env func(string) (string, bool)) (*Config, error) {
	if env == nil {
		env = noEnv
	}
	var ps problems
	c := Default()
	// The top-level alias starts unset so that only a value written in the file wins over http's.
	c.MaxBodyBytes = 0

	root, err := parseYAML(data)
	switch {
	case err != nil:
		ps.add("", "cannot parse YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	case root == nil || isNull(root):
		// An empty file: every default.
	case root.Kind != yaml.MappingNode:
		ps.add("", "the document must be a mapping of keys, got %s", describe(root, true))
	default:
		interpolate(root, "", env, &ps)
		newWalker(&ps).decode(root, reflect.ValueOf(c).Elem(), "", false, 0)
	}

	// A negative alias is left as is for Validate to name; otherwise both end up holding the effective value.
	if c.MaxBodyBytes > 0 {
		c.HTTP.MaxBodyBytes = c.MaxBodyBytes
	}
	if c.MaxBodyBytes >= 0 {
		c.MaxBodyBytes = c.HTTP.MaxBodyBytes
	}

	applyEnv(c, env, &ps)
	var vs problems
	c.validate(&vs)
	ps = append(ps, vs.below(ps)...)
	if err := ps.asError(); err != nil {
		return nil, err
	}
	c.Warnings = c.bootWarnings()
	return c, nil
}

// parseYAML returns the root node of the only document in data, or nil for an empty document.
func parseYAML(data []byte) (root *yaml.Node, err error) {
	defer func() {
		// The YAML parser is third-party code fed untrusted bytes; a panic in it must become a refusal,
		// not a crash of the caller (the admin API will parse sources at runtime).
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("parser failure: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, errors.New("more than one YAML document")
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

// bootWarnings lists what the operator should know about a valid configuration.
func (c *Config) bootWarnings() []string {
	var w []string
	if c.WAL.Type == WALNone {
		var dropped []string
		for _, r := range []string{RoleDispatch, RoleStorage} {
			if slices.Contains(c.Node.Roles, r) {
				dropped = append(dropped, r)
			}
		}
		if len(dropped) > 0 {
			w = append(w, "wal.type none: role(s) "+strings.Join(dropped, ", ")+" dropped from the effective roles (no queue to read)")
		}
	}
	return append(w, c.TrustWarnings()...)
}

func noEnv(string) (string, bool) { return "", false }
