// Package sources is the API-managed source store (inventory G.2): the sources an operator creates, replaces
// and deletes through /v1/tenants/{t}/sources, layered over the file's read-only sources.
//
// Three kinds (source_store.type): static (the file only: every write is ErrReadOnly), persistent (this node's
// store: a change commits in one synced batch with its audit row) and redis (a Redis shared by a fleet: a
// pending audit row, the change, the finished row; the next boot settles a pending row by hashing the
// subject). A source is valid through the API exactly when the same source written in the file would be
// (config.ParseSource), and a source name is one source id across tenants, so a hook's URL finds one source
// under either routing.
//
// A store that cannot answer is ErrUnavailable, and the edge then answers a source it does not know 503, never
// 404 (edge.LayeredSources).
package sources

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
)

var (
	// ErrReadOnly refuses a write to a static store, or to a source the file defines (409 source_store_read_only).
	ErrReadOnly = errors.New("sources: the source store is read-only")
	// ErrNotFound is a source that does not exist (404 source_not_found).
	ErrNotFound = errors.New("sources: no such source")
	// ErrExists refuses a name another tenant's source holds (409 source_exists).
	ErrExists = errors.New("sources: the source id is taken")
	// ErrUnavailable is a store that cannot answer now (503 store_unavailable).
	ErrUnavailable = errors.New("sources: source store unavailable")
)

// Kinds of source store (source_store.type).
const (
	KindStatic     = "static"
	KindPersistent = "persistent"
	KindRedis      = "redis"
)

// Entry is one source: its tenant, name (its source id), canonical spec and parsed form.
type Entry struct {
	Tenant, Name string
	Spec         []byte // canonical JSON (never printed: it may hold secrets)
	Source       config.Source
	Static       bool // defined in the file
}

// Change is who makes a change, for its audit row; Lifecycle flags the row for publication.
type Change struct {
	Audit     store.AuditEntry
	Lifecycle bool
	// DeadLetter lets a delete go ahead while the source has delivery rows still to deliver: its waiting rows
	// are dead-lettered ({source_gone, id}). Without it such a delete is refused with
	// *store.SourceHasDeliveriesError and changes nothing.
	DeadLetter bool
}

// Backend is where API-managed sources live.
type Backend interface {
	Kind() string
	// List returns every API-managed source's stored spec.
	List() ([]store.StoredSource, error)
	// Put writes spec (canonical) as tenant/name; prev is its current spec (nil: a create). It fails with
	// ErrExists when another tenant holds name.
	Put(c Change, tenant, name string, spec []byte) (store.AuditRow, error)
	// Delete removes tenant/name (ErrNotFound when absent). The source's delivery rows live in this node's
	// store whatever the backend: a delete is refused while any is waiting or in flight, unless c.DeadLetter.
	Delete(c Change, tenant, name string) (store.AuditRow, error)
}

// Set is the node's sources: the file's and the backend's.
type Set struct {
	cfg     *config.Config
	backend Backend
	// Check builds what a source needs at runtime (its verifier, its sinks) and reports what cannot be built;
	// nil checks nothing beyond the config's validation.
	Check func(id string, s config.Source) error
	// Changed is called after every successful write (the instance applies the new set to the edge and
	// dispatch).
	Changed func()
}

// NewSet returns the sources of cfg's file over backend.
func NewSet(cfg *config.Config, backend Backend) *Set { return &Set{cfg: cfg, backend: backend} }

// Kind is the backend's kind.
func (s *Set) Kind() string { return s.backend.Kind() }

// List returns every source of tenant ("" = every tenant), the file's first, each group sorted by name.
func (s *Set) List(tenant string) ([]Entry, error) {
	var out []Entry
	ids := make([]string, 0, len(s.cfg.Sources))
	for id := range s.cfg.Sources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		src := s.cfg.Sources[id]
		t := src.Tenant
		if t == "" {
			t = "default"
		}
		if tenant == "" || t == tenant {
			out = append(out, Entry{Tenant: t, Name: id, Source: src, Static: true})
		}
	}
	dyn, err := s.Dynamic()
	if err != nil {
		return nil, err
	}
	for _, e := range dyn {
		if tenant == "" || e.Tenant == tenant {
			out = append(out, e)
		}
	}
	return out, nil
}

// Dynamic returns the backend's sources, parsed (a stored spec the node can no longer parse is skipped and
// reported in the error only when nothing else fails: it never hides the rest).
func (s *Set) Dynamic() ([]Entry, error) {
	stored, err := s.backend.List()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out := make([]Entry, 0, len(stored))
	for _, st := range stored {
		src, err := s.cfg.ParseSource(st.Name, st.Tenant, st.Spec)
		if err != nil {
			continue
		}
		out = append(out, Entry{Tenant: st.Tenant, Name: st.Name, Spec: st.Spec, Source: src})
	}
	return out, nil
}

// Sources returns the backend's sources keyed by source id, for the edge and dispatch.
func (s *Set) Sources() (map[string]config.Source, error) {
	dyn, err := s.Dynamic()
	if err != nil {
		return nil, err
	}
	m := make(map[string]config.Source, len(dyn))
	for _, e := range dyn {
		m[e.Name] = e.Source
	}
	return m, nil
}

// Get returns tenant's source name (ErrNotFound when it has none of that name).
func (s *Set) Get(tenant, name string) (Entry, error) {
	all, err := s.List(tenant)
	if err != nil {
		return Entry{}, err
	}
	for _, e := range all {
		if e.Name == name {
			return e, nil
		}
	}
	return Entry{}, ErrNotFound
}

// Validate parses body as tenant's source name and returns its canonical spec; a *config.Error names what is
// wrong (400 invalid_source).
func (s *Set) Validate(tenant, name string, body []byte) ([]byte, config.Source, error) {
	src, err := s.cfg.ParseSource(name, tenant, body)
	if err != nil {
		return nil, config.Source{}, err
	}
	if s.Check != nil {
		if err := s.Check(name, src); err != nil {
			return nil, config.Source{}, &config.Error{Problems: []config.Problem{{Path: "sources." + name, Msg: err.Error()}}}
		}
	}
	spec, err := config.CanonicalSource(body)
	if err != nil {
		return nil, config.Source{}, err
	}
	return spec, src, nil
}

// Put creates or replaces tenant's source name from body. The row is nil-free only when something changed
// (store.ErrNoChange for the same spec).
func (s *Set) Put(c Change, tenant, name string, body []byte) (store.AuditRow, error) {
	if _, static := s.cfg.Sources[name]; static || s.backend.Kind() == KindStatic {
		return store.AuditRow{}, ErrReadOnly
	}
	spec, src, err := s.Validate(tenant, name, body)
	if err != nil {
		return store.AuditRow{}, err
	}
	c.Audit.Entity = entity(tenant, name, src)
	row, err := s.backend.Put(c, tenant, name, spec)
	if err == nil && s.Changed != nil {
		s.Changed()
	}
	return row, err
}

// Delete deletes tenant's source name.
func (s *Set) Delete(c Change, tenant, name string) (store.AuditRow, error) {
	if _, static := s.cfg.Sources[name]; static || s.backend.Kind() == KindStatic {
		return store.AuditRow{}, ErrReadOnly
	}
	c.Audit.Entity = entity(tenant, name, config.Source{Tenant: tenant})
	row, err := s.backend.Delete(c, tenant, name)
	if err == nil && s.Changed != nil {
		s.Changed()
	}
	return row, err
}

// Subject is the audit subject of tenant's source name.
func Subject(tenant, name string) string { return "source:" + tenant + "/" + name }

// entity is the redacted entity a lifecycle event carries.
func entity(tenant, name string, src config.Source) []byte {
	b, _ := json.Marshal(map[string]any{"tenant": tenant, "name": name, "source_id": name,
		"spec": config.RedactedSource(src)})
	return b
}

// Static is the backend of source_store.type static: no API-managed source, every write refused.
type Static struct{}

// Kind implements Backend.
func (Static) Kind() string { return KindStatic }

// List implements Backend.
func (Static) List() ([]store.StoredSource, error) { return nil, nil }

// Put implements Backend.
func (Static) Put(Change, string, string, []byte) (store.AuditRow, error) {
	return store.AuditRow{}, ErrReadOnly
}

// Delete implements Backend.
func (Static) Delete(Change, string, string) (store.AuditRow, error) {
	return store.AuditRow{}, ErrReadOnly
}
