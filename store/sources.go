package store

import (
	"bytes"
	"fmt"
)

// API-managed sources (the persistent source store): default CF s:<tenant>\0<name> → the source's spec
// (canonical JSON). They are written only through Audited, so each change commits with its audit row.

const sourcePrefix = "s:"

// SourceKey is the default CF key of source name of tenant.
func SourceKey(tenant, name string) []byte {
	k := append([]byte(sourcePrefix), tenant...)
	k = append(k, 0)
	return append(k, name...)
}

// StoredSource is one API-managed source as stored.
type StoredSource struct {
	Tenant, Name string
	Spec         []byte
}

// ListSources returns every API-managed source, in (tenant, name) order.
func (db *DB) ListSources() ([]StoredSource, error) {
	var out []StoredSource
	err := db.read(func() error {
		return db.scan(cfDefault, []byte(sourcePrefix), func(k, v []byte) error {
			tenant, name, ok := bytes.Cut(k[len(sourcePrefix):], []byte{0})
			if !ok {
				return fmt.Errorf("source key %q: %w", k, ErrBadKey)
			}
			out = append(out, StoredSource{Tenant: string(tenant), Name: string(name), Spec: bytes.Clone(v)})
			return nil
		})
	})
	return out, err
}
