package edge

import "bytes"

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
