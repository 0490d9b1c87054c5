package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
)

// callerKey is the context key of an in-process caller's principal (API.Serve sets it).
type callerKey struct{}

// Caller is a principal an in-process client (the console) authenticated with its token. It is opaque: the
// client can ask what the principal may do, and call the API as it, never change it.
type Caller struct{ p *principal }

// Name is the principal's configured name.
func (c Caller) Name() string { return c.p.name }

// AllTenants reports whether the principal holds every tenant (tenants: ["*"]).
func (c Caller) AllTenants() bool { return c.p.allTenants }

// Tenants lists the principal's tenants (nil when it holds every tenant).
func (c Caller) Tenants() []string { return slices.Clone(c.p.tenants) }

// Sees reports whether the principal may see or change tenant's objects.
func (c Caller) Sees(tenant string) bool { return c.p.sees(tenant) }

// Has reports whether the principal holds scope.
func (c Caller) Has(scope string) bool { return c.p.has(scope) }

// API is the admin API as an in-process client calls it: every request goes through the same routes, scope
// checks and tenant checks as one from the network, so such a client can do nothing the API refuses.
type API struct {
	a   *api
	mux *http.ServeMux
}

// Authenticate finds the principal holding token (compared as the API compares a bearer token).
func (x *API) Authenticate(token string) (Caller, bool) {
	r := &http.Request{Header: http.Header{"Authorization": {"Bearer " + strings.TrimSpace(token)}}}
	p, _ := authenticate(x.a.principals, r)
	if p == nil {
		return Caller{}, false
	}
	return Caller{p: p}, true
}

// Serve answers r, a request to a /v1 route, as the caller c.
func (x *API) Serve(c Caller, w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(contextWithCaller(r, c.p))
	r.Header.Del("Authorization")
	x.mux.ServeHTTP(w, r)
}

// Config is the node's config (read only).
func (x *API) Config() *config.Config { return x.a.d.Config }

// Version is the running build's version.
func (x *API) Version() string { return x.a.d.Version }

// Deps are what the listener was built with (the console reads the store and the registry through them).
func (x *API) Deps() *Deps { return x.a.d }

// Errors of the in-process reads, matching the API's refusals.
var (
	// ErrForbidden: the caller lacks the scope or the tenant.
	ErrForbidden = errors.New("admin: forbidden")
	// ErrUnavailable: the store is closed, failed, or kept by no WAL.
	ErrUnavailable = errors.New("admin: store unavailable")
)

// Scopes the in-process reads require, as the routes they stand beside.
const (
	ScopeDLQRead         = scopeDLQRead
	ScopeQuarantineRead  = scopeQuarantineRead
	ScopeConfigRead      = scopeConfigRead
	ScopeMetricsRead     = scopeMetricsRead
	ScopeReplaysWrite    = scopeReplaysWrite
	ScopeQuarantineWrite = scopeQuarantineWrite
)

func (x *API) store() (*store.DB, error) {
	if x.a.d.Config.WAL.Type == config.WALNone || x.a.d.Store == nil {
		return nil, ErrUnavailable
	}
	db := x.a.d.Store()
	if db == nil {
		return nil, ErrUnavailable
	}
	return db, nil
}

// QuarantineEntry reads one held hook whole (headers and body), for a caller with quarantine:read that sees its
// tenant (ErrForbidden otherwise; store.ErrNotFound when the pen does not hold it).
func (x *API) QuarantineEntry(c Caller, receivedAt int64, id [16]byte) (store.QuarantineEntry, error) {
	if !c.Has(scopeQuarantineRead) {
		return store.QuarantineEntry{}, ErrForbidden
	}
	db, err := x.store()
	if err != nil {
		return store.QuarantineEntry{}, err
	}
	e, err := db.GetQuarantine(receivedAt, id)
	if err != nil {
		if !c.AllTenants() {
			return store.QuarantineEntry{}, ErrForbidden
		}
		return e, err
	}
	if !c.Sees(e.Hook.Tenant) {
		return store.QuarantineEntry{}, ErrForbidden
	}
	return e, nil
}

func contextWithCaller(r *http.Request, p *principal) context.Context {
	return context.WithValue(r.Context(), callerKey{}, p)
}
