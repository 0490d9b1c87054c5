package store

import "bytes"

// Runtime rate-limit overrides (admin PUT /v1/tenants/{t}/rate-limit): default CF rl:<tenant> → the override
// (canonical JSON {"rate","burst"}). They are written only through Audited, so each change commits with its
// audit row, and the edge loads them at boot.

const rateLimitPrefix = "rl:"

// RateLimitKey is the default CF key of tenant's rate-limit override.
func RateLimitKey(tenant string) []byte { return append([]byte(rateLimitPrefix), tenant...) }

// StoredRateLimit is one tenant's override as stored.
type StoredRateLimit struct {
	Tenant string
	Spec   []byte
}

// ListRateLimits returns every stored rate-limit override, in tenant order.
func (db *DB) ListRateLimits() ([]StoredRateLimit, error) {
	var out []StoredRateLimit
	err := db.read(func() error {
		return db.scan(cfDefault, []byte(rateLimitPrefix), func(k, v []byte) error {
			out = append(out, StoredRateLimit{Tenant: string(k[len(rateLimitPrefix):]), Spec: bytes.Clone(v)})
			return nil
		})
	})
	return out, err
}
