package edge

import (
	"fmt"
	"sync/atomic"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
)

// DefaultTenant owns shared sources: a source of tenant "default" answers any tenant's URL.
const DefaultTenant = "default"

// Source is what ingest needs of a configured source.
type Source struct {
	ID     string
	Tenant string
	// Sinks are the delivery rows a commit writes, one per sink, bound by index and type.
	Sinks []store.SinkBinding
	// Trust is the source's verifier, verify-failure policy, dedupe key and store_headers policy.
	Trust *Trust
}

// SourceStore looks sources up by id. Lookup returns ErrUnknownSource or
// ErrSourcesUnavailable; a store that cannot answer must never say "unknown".
type SourceStore interface {
	Lookup(id []byte) (*Source, error)
}

// StaticSources is the read-only source store built from the config file.
type StaticSources struct {
	byID map[string]*Source
}

// NewStaticSources indexes the configured sources and builds their trust bundles (a
// verifier that cannot be built fails here, at boot).
func NewStaticSources(cfg map[string]config.Source) (*StaticSources, error) {
	s := &StaticSources{byID: make(map[string]*Source, len(cfg))}
	for id, src := range cfg {
		tenant := src.Tenant
		if tenant == "" {
			tenant = DefaultTenant
		}
		sinks := make([]store.SinkBinding, len(src.Sinks))
		for i, k := range src.Sinks {
			sinks[i] = store.SinkBinding{Index: uint16(i), Type: k.Type, Ordered: k.Ordered}
		}
		trust, err := NewTrust(src)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", id, err)
		}
		s.byID[id] = &Source{ID: id, Tenant: tenant, Sinks: sinks, Trust: trust}
	}
	return s, nil
}

// Lookup implements SourceStore; the map index with a converted key does not allocate.
func (s *StaticSources) Lookup(id []byte) (*Source, error) {
	if src, ok := s.byID[string(id)]; ok {
		return src, nil
	}
	return nil, ErrUnknownSource
}

// urlTenant returns the tenant a request for src belongs to when a tenant_path URL names tenant t. The
// URL's tenant is authoritative: a source owned by another tenant does not exist for it (404
// unknown_source). A shared source takes the URL's tenant when it may: one that verifies nothing only
// with trust_url_tenant, one with an allow-list only for a listed tenant, any other under the node's
// http.max_url_tenants cap, which mintURLTenant applies once the request is verified.
func (e *Edge) urlTenant(src *Source, t []byte) (string, error) {
	if src.Tenant == string(t) {
		return src.Tenant, nil
	}
	tr := src.Trust
	switch {
	case src.Tenant != DefaultTenant:
		return "", ErrUnknownSource
	case !tr.verifies && !tr.TrustURLTenant:
		return "", ErrUnknownSource
	case tr.urlTenants != nil:
		if name, ok := tr.urlTenants[string(t)]; ok {
			return name, nil
		}
		return "", ErrUnknownSource
	}
	if name, ok := e.tenants.lookup(t); ok {
		return name, nil
	}
	return string(t), nil // not minted yet: mintURLTenant decides after verification
}

// mintURLTenant admits for good the tenant a verified (or accept_flag) request of a shared source took
// from its URL, past which it would be stored: a new tenant past http.max_url_tenants is refused (404
// unknown_source), so a forger cannot fill the cap and a sender rotating names cannot exceed it.
func (e *Edge) mintURLTenant(src *Source, tenant string) error {
	if tenant == src.Tenant || src.Tenant != DefaultTenant || src.Trust.urlTenants != nil {
		return nil
	}
	ok, full := e.tenants.mint(tenant, e.db())
	if full {
		e.log.Warn().Int("http.max_url_tenants", e.tenants.max).
			Msg("tenant_path URLs reached http.max_url_tenants: a URL naming a new tenant of a shared source is answered 404 unknown_source")
	}
	if !ok {
		return ErrUnknownSource
	}
	return nil
}

// LayeredSources is the edge's source store when sources are also managed through the admin API: the file's
// sources first (read-only), then the API-managed ones, swapped whole by Set on every change so a changed
// source is picked up without a restart. While the API store cannot answer (Fail), a source the file does not
// name is ErrSourcesUnavailable (503), never ErrUnknownSource: a source is not reported gone because its store
// is down.
type LayeredSources struct {
	static *StaticSources
	dyn    atomic.Pointer[dynamicSources]
}

type dynamicSources struct {
	s   *StaticSources
	err error
}

// NewLayeredSources layers API-managed sources over static; it answers ErrSourcesUnavailable for any other
// source until the first Set.
func NewLayeredSources(static *StaticSources) *LayeredSources {
	l := &LayeredSources{static: static}
	l.dyn.Store(&dynamicSources{err: ErrSourcesUnavailable})
	return l
}

// Set replaces the API-managed sources (keyed by source id). A source whose trust cannot be built fails the
// whole set and keeps the previous one.
func (l *LayeredSources) Set(cfg map[string]config.Source) error {
	s, err := NewStaticSources(cfg)
	if err != nil {
		return err
	}
	l.dyn.Store(&dynamicSources{s: s})
	return nil
}

// Fail marks the API-managed sources unavailable (their store cannot answer) until the next Set.
func (l *LayeredSources) Fail(err error) {
	l.dyn.Store(&dynamicSources{err: fmt.Errorf("%w: %w", ErrSourcesUnavailable, err)})
}

// Lookup implements SourceStore.
func (l *LayeredSources) Lookup(id []byte) (*Source, error) {
	if src, err := l.static.Lookup(id); err == nil {
		return src, nil
	}
	d := l.dyn.Load()
	if d.err != nil {
		return nil, ErrSourcesUnavailable
	}
	return d.s.Lookup(id)
}
