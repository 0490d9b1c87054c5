package sources

import (
	"time"

	"github.com/ankusa-go/ankusa/store"
)

// Persistent is the backend of source_store.type persistent: this node's store, each change committed with
// its audit row in one synced batch (store.DB.Audited).
type Persistent struct {
	// DB returns the open store (nil while it is closed: ErrUnavailable).
	DB func() *store.DB
}

// Kind implements Backend.
func (Persistent) Kind() string { return KindPersistent }

func (p Persistent) db() (*store.DB, error) {
	if db := p.DB(); db != nil {
		return db, nil
	}
	return nil, ErrUnavailable
}

// List implements Backend.
func (p Persistent) List() ([]store.StoredSource, error) {
	db, err := p.db()
	if err != nil {
		return nil, err
	}
	return db.ListSources()
}

// nameKey holds the tenant owning a source id, so one id is one source across tenants.
func nameKey(name string) []byte { return append([]byte("sn:"), name...) }

// Put implements Backend.
func (p Persistent) Put(c Change, tenant, name string, spec []byte) (store.AuditRow, error) {
	db, err := p.db()
	if err != nil {
		return store.AuditRow{}, err
	}
	return db.Audited(func(get store.AuditReader) (store.AuditEntry, []store.AuditOp, error) {
		owner, err := get(nameKey(name))
		if err != nil {
			return store.AuditEntry{}, nil, err
		}
		if owner != nil && string(owner) != tenant {
			return store.AuditEntry{}, nil, ErrExists
		}
		prev, err := get(store.SourceKey(tenant, name))
		if err != nil {
			return store.AuditEntry{}, nil, err
		}
		e := c.Audit
		e.Action, e.Subject, e.Tenant = "source.update", Subject(tenant, name), tenant
		if prev == nil {
			e.Action = "source.create"
		}
		e.Before, e.After, e.Lifecycle = prev, spec, c.Lifecycle
		return e, []store.AuditOp{
			{Key: store.SourceKey(tenant, name), Value: spec},
			{Key: nameKey(name), Value: []byte(tenant)},
		}, nil
	})
}

// Delete implements Backend.
func (p Persistent) Delete(c Change, tenant, name string) (store.AuditRow, error) {
	db, err := p.db()
	if err != nil {
		return store.AuditRow{}, err
	}
	// The source's rows are counted (and buried, with c.DeadLetter) in the batch of the delete and its row.
	d := store.SourceDelete{Tenant: tenant, Source: name, DeadLetter: c.DeadLetter, At: time.Now().UnixMilli()}
	row, _, err := db.AuditedSourceDelete(d, func(get store.AuditReader) (store.AuditEntry, []store.AuditOp, error) {
		prev, err := get(store.SourceKey(tenant, name))
		if err != nil {
			return store.AuditEntry{}, nil, err
		}
		if prev == nil {
			return store.AuditEntry{}, nil, ErrNotFound
		}
		e := c.Audit
		e.Action, e.Subject, e.Tenant = "source.delete", Subject(tenant, name), tenant
		e.Before, e.After, e.Lifecycle = prev, nil, c.Lifecycle
		return e, []store.AuditOp{
			{Key: store.SourceKey(tenant, name), Delete: true},
			{Key: nameKey(name), Delete: true},
		}, nil
	})
	return row, err
}
