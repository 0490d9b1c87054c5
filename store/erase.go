package store

import "fmt"

// Tenant erase (seed: Tenant erase; inventory G.5). The default CF holds
//
//	m:erasing:<tenant> → the erase job's progress (EraseProgress), synced after each stage
//	m:erased:<tenant>  → the tombstone: unix ms of the erase, written with the job's last stage
//
// While m:erasing is present the tenant is closed (ingest 503 tenant_erasing, dispatch claims none of its
// rows); a node that restarts with one resumes the job at its stage.
const (
	erasingPrefix = "m:erasing:"
	erasedPrefix  = "m:erased:"
)

// TenantErased reports whether tenant's tombstone is in the store: its archived hooks are gone (410).
func (db *DB) TenantErased(tenant string) (bool, error) {
	var found bool
	err := db.read(func() error {
		v, err := db.getCF(cfDefault, []byte(erasedPrefix+tenant))
		found = v != nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("cannot read the tombstone of tenant %s: %w", tenant, err)
	}
	return found, nil
}
