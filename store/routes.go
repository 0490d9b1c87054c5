package store

import (
	"bytes"
	"fmt"
)

// API-managed routes (the route guard's table, routes.store.type local): default CF
//
//	r:<id>                → the route as stored (JSON: canonical spec, inserted_at, updated_at, revision)
//	rt:<tenant>\0<id>     → empty: the route belongs to tenant (a tenant erase finds its routes here)
//	m:route_ip_rules      → the global IP rules set through the API (canonical JSON); absent: routes.ip_rules
//
// They are written only through Audited, so each change commits with its audit row (and its lifecycle flag).

const (
	routePrefix       = "r:"
	routeTenantPrefix = "rt:"
	metaRouteIPRules  = "m:route_ip_rules"
)

// RouteKey is the default CF key of route id.
func RouteKey(id string) []byte { return append([]byte(routePrefix), id...) }

// RouteTenantKey is the default CF key saying route id belongs to tenant.
func RouteTenantKey(tenant, id string) []byte {
	k := append([]byte(routeTenantPrefix), tenant...)
	k = append(k, 0)
	return append(k, id...)
}

// RouteIPRulesKey is the default CF key of the global IP rules set through the API.
func RouteIPRulesKey() []byte { return []byte(metaRouteIPRules) }

// RevisionKey is the default CF key of subject's audit revision (Audited bumps it with every row).
func RevisionKey(subject string) []byte { return append([]byte(revisionPrefix), subject...) }

// StoredRoute is one route as stored.
type StoredRoute struct {
	ID    string
	Value []byte
}

// ListRoutes returns every stored route, in id order.
func (db *DB) ListRoutes() ([]StoredRoute, error) {
	var out []StoredRoute
	err := db.read(func() error {
		return db.scan(cfDefault, []byte(routePrefix), func(k, v []byte) error {
			out = append(out, StoredRoute{ID: string(k[len(routePrefix):]), Value: bytes.Clone(v)})
			return nil
		})
	})
	return out, err
}

// RouteIPRules returns the global IP rules set through the API (nil: none, routes.ip_rules applies).
func (db *DB) RouteIPRules() ([]byte, error) {
	var v []byte
	err := db.read(func() error {
		var err error
		v, err = db.getCF(cfDefault, []byte(metaRouteIPRules))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read the global IP rules: %w", err)
	}
	return v, nil
}
