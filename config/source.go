package config

import (
	"encoding/json"
	"reflect"
)

// ParseSource decodes one source from data (YAML or JSON, the value of sources.<id> in a file) and validates it
// as the config file's sources are, under c's node settings (wal.type none needs a durable sink). The source
// belongs to tenant: a body naming another tenant is refused. Problems name their paths under sources.<id>
// and never echo a value. The API-managed source stores use it, so an API source is valid exactly when the
// same source written in the file would be.
func (c *Config) ParseSource(id, tenant string, data []byte) (Source, error) {
	var ps problems
	var s Source
	path := join("sources", id)
	root, err := parseYAML(data)
	switch {
	case err != nil:
		ps.add(path, "cannot parse the source")
	case root == nil || isNull(root):
		ps.add(path, "is empty")
	default:
		newWalker(&ps).decode(root, reflect.ValueOf(&s).Elem(), path, true, 0)
	}
	switch {
	case s.Tenant == "":
		s.Tenant = tenant
	case s.Tenant != tenant:
		ps.add(join(path, "tenant"), "must be the tenant of the URL")
	}
	if len(ps) == 0 {
		c.validateSource(&ps, id, s)
	}
	if err := ps.asError(); err != nil {
		return Source{}, err
	}
	return s, nil
}

// CanonicalSource is data (a source ParseSource accepted) re-encoded as JSON with sorted keys: the form the
// source stores keep, so equal specs are equal bytes (a rewrite of the same spec is a no-op).
func CanonicalSource(data []byte) ([]byte, error) {
	root, err := parseYAML(data)
	if err != nil {
		return nil, err
	}
	var v any
	if root != nil {
		if err := root.Decode(&v); err != nil {
			return nil, err
		}
	}
	return json.Marshal(normalize(v))
}

// normalize turns the map[any]any a YAML decode may produce into map[string]any for JSON.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = normalize(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			if ks, ok := k.(string); ok {
				m[ks] = normalize(e)
			}
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = normalize(e)
		}
	}
	return v
}

// RedactedSource is s as GET /v1/config prints it: secrets and sink credentials "[REDACTED]".
func RedactedSource(s Source) any {
	return redactValue(reflect.ValueOf(s), false)
}
