package edge

import (
	"bytes"
	"sync"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
)

// Route is what a URL resolves to. Both fields are views into the request path and
// valid only while the request is being handled. Tenant is empty when the URL names
// none (path routing): the source's tenant applies.
type Route struct {
	Tenant []byte
	Source []byte
}

// RouteResolver turns a request path into a Route; false means the URL names no source
// (404 unknown_source). It is the seam a custom URL scheme plugs into.
type RouteResolver interface {
	Resolve(path []byte) (Route, bool)
}

// NewResolver returns the shipped resolver for routing ("path" or "tenant_path") under
// prefix ("/" for none).
func NewResolver(routing, prefix string) RouteResolver {
	p := []byte(prefix)
	if prefix == "/" {
		p = nil
	}
	if routing == "tenant_path" {
		return tenantPathResolver{prefix: p}
	}
	return pathResolver{prefix: p}
}

// pathResolver serves POST <prefix>/{source}.
type pathResolver struct{ prefix []byte }

func (r pathResolver) Resolve(path []byte) (Route, bool) {
	rest, ok := cutPrefix(path, r.prefix)
	if !ok || !validID(rest) {
		return Route{}, false
	}
	return Route{Source: rest}, true
}

// tenantPathResolver serves POST <prefix>/{tenant}/{source}; the URL's tenant is
// authoritative.
type tenantPathResolver struct{ prefix []byte }

func (r tenantPathResolver) Resolve(path []byte) (Route, bool) {
	rest, ok := cutPrefix(path, r.prefix)
	if !ok {
		return Route{}, false
	}
	i := bytes.IndexByte(rest, '/')
	if i < 0 {
		return Route{}, false
	}
	tenant, source := rest[:i], rest[i+1:]
	if !validID(tenant) || !validID(source) {
		return Route{}, false
	}
	return Route{Tenant: tenant, Source: source}, true
}

// cutPrefix strips prefix and the slash after it.
func cutPrefix(path, prefix []byte) ([]byte, bool) {
	if !bytes.HasPrefix(path, prefix) {
		return nil, false
	}
	rest := path[len(prefix):]
	if len(rest) == 0 || rest[0] != '/' {
		return nil, false
	}
	return rest[1:], true
}

// validID reports whether b is a tenant or source id: [A-Za-z0-9_-]{1,64}.
func validID(b []byte) bool {
	if len(b) == 0 || len(b) > 64 {
		return false
	}
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// URLTenantSettings bound the tenants tenant_path URLs may mint for shared sources that have no
// allow-list.
type URLTenantSettings struct {
	// Max is http.max_url_tenants: the tenants the URLs may add, beyond Known and the store's.
	Max int
	// Known are the tenants the config names (sources, rate limits, dispatch windows, allow-lists):
	// always served, never counted.
	Known []string
}

func urlTenantSettingsFrom(cfg *config.Config) URLTenantSettings {
	set := URLTenantSettings{Max: cfg.HTTP.MaxURLTenants}
	for _, s := range cfg.Sources {
		set.Known = append(set.Known, s.Tenant)
		set.Known = append(set.Known, s.URLTenants...)
		for t := range s.TenantSecrets {
			set.Known = append(set.Known, t)
		}
	}
	for t := range cfg.RateLimits.Tenants {
		set.Known = append(set.Known, t)
	}
	for t := range cfg.Dispatch.Tenants {
		set.Known = append(set.Known, t)
	}
	return set
}

// urlTenantGate remembers the tenants tenant_path URLs named for shared sources without an allow-list,
// and refuses a new one past the cap: each tenant costs a store ordinal, rate buckets and a fairness
// share, so a caller rotating names must not mint them without bound. A tenant is minted only once a
// request of it passed verification (mint), so forged requests cannot fill the cap; before that, the
// request runs under the name it asked for. Tenants the config names and tenants already in the store
// pass without counting. The count lives as long as the process: a restart starts it again (what was
// minted is then in the store), which is why an allow-list is the bound to prefer on an internet-facing
// node.
type urlTenantGate struct {
	max int

	mu      sync.RWMutex
	tenants map[string]string // every tenant served, mapped to itself so a lookup allocates nothing
	minted  int               // tenants added by URLs, not from the config or the store
	warned  bool
}

func newURLTenantGate(set URLTenantSettings) *urlTenantGate {
	g := &urlTenantGate{max: set.Max, tenants: make(map[string]string, len(set.Known))}
	for _, t := range set.Known {
		g.tenants[t] = t
	}
	return g
}

// lookup returns the tenant named t if it is served already, without allocating.
func (g *urlTenantGate) lookup(t []byte) (string, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	name, ok := g.tenants[string(t)]
	return name, ok
}

// mint admits tenant for good: a tenant the store holds, or a new one while the cap allows. ok is false
// past the cap; full is true the first time the cap refuses one. The store (nil while closed) is asked
// only about a tenant not served yet, once per process.
func (g *urlTenantGate) mint(tenant string, db *store.DB) (ok, full bool) {
	g.mu.RLock()
	_, served := g.tenants[tenant]
	g.mu.RUnlock()
	if served {
		return true, false
	}
	known := storeKnows(db, tenant)
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.tenants[tenant]; ok {
		return true, false
	}
	if !known {
		if g.minted >= g.max {
			full, g.warned = !g.warned, true
			return false, full
		}
		g.minted++
	}
	g.tenants[tenant] = tenant
	return true, false
}

// storeKnows reports whether the open store has committed a hook of tenant.
func storeKnows(db *store.DB, tenant string) bool {
	if db == nil {
		return false
	}
	_, ok := db.TenantOrdinal(tenant)
	return ok
}
