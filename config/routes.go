package config

import (
	"errors"

	"github.com/ankusa-go/ankusa/routes"
)

// Routes is the route guard (inventory A.2 step 1, B.3 routes.*): with enabled, a request is taken only on an
// enabled route's path and method, from an address the IP rules allow, and refused (404, or 403 for a denied
// address) before anything of it is read. Off (the default), every POST is captured as the URL routing says.
type Routes struct {
	Enabled bool `yaml:"enabled"`
	// MaxRoutes caps the routes the table holds (enabled or not); past it a create is 409. Default 10_000; > 0.
	MaxRoutes int `yaml:"max_routes"`
	// Store is where API-managed routes live: local (this node's store; the only type).
	Store RouteStore `yaml:"store"`
	// TrustedProxies are CIDRs (or addresses) whose X-Forwarded-For is believed, walked from the right; with
	// none the header is never read and the socket's address decides.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// IPRules are the global rules, checked before any route: {default: allow|deny, rules: [{action, cidr}]}.
	// Rules set through the admin API (PUT /v1/ip-rules) are kept in the store and win over these.
	IPRules routes.RulesSpec `yaml:"ip_rules"`
	// IPDeniedStatus is the answer to a denied address: 403 (forbidden, the default) or 404 (not_found, which
	// does not tell a prober that the path exists).
	IPDeniedStatus int `yaml:"ip_denied_status"`
	// LogSample logs 1 in N refusals at debug (0: none). Default 100.
	LogSample int `yaml:"log_sample"`
	// Seed routes are created at boot when the store holds no route of their id (an API change to one is
	// kept; a deleted one comes back at the next boot while it is listed here).
	Seed []routes.Spec `yaml:"seed"`
}

// RouteStore is routes.store.
type RouteStore struct {
	Type string `yaml:"type"` // local
}

// RouteStoreLocal is routes.store.type local: this node's store.
const RouteStoreLocal = "local"

func (c *Config) validateRoutes(ps *problems) {
	r := c.Routes
	positive(ps, "routes.max_routes", r.MaxRoutes)
	nonNegative(ps, "routes.log_sample", r.LogSample)
	if r.Store.Type != RouteStoreLocal {
		ps.oneOf("routes.store.type", []string{RouteStoreLocal}, r.Store.Type)
	}
	if r.IPDeniedStatus != 403 && r.IPDeniedStatus != 404 {
		ps.mustBe("routes.ip_denied_status", "403 or 404", r.IPDeniedStatus)
	}
	if _, err := routes.ParseProxies(r.TrustedProxies); err != nil {
		routeProblem(ps, "routes.trusted_proxies", err)
	}
	if _, _, err := routes.ParseRules(r.IPRules); err != nil {
		routeProblem(ps, "routes.ip_rules", err)
	}
	if len(r.Seed) > r.MaxRoutes && r.MaxRoutes > 0 {
		ps.mustBe("routes.seed", "at most routes.max_routes entries", len(r.Seed))
	}
	var list []*routes.Route
	seen := map[string]bool{}
	for i, s := range r.Seed {
		at := index("routes.seed", i)
		rt, err := routes.ParseSpec(s)
		if err != nil {
			routeProblem(ps, at, err)
			continue
		}
		if seen[s.ID] {
			ps.add(join(at, "id"), "must be unique, got %s again", quote(s.ID))
			continue
		}
		seen[s.ID] = true
		list = append(list, rt)
	}
	if _, err := routes.Build(list, routes.RulesSpec{}, nil); err != nil {
		var ce *routes.ConflictError
		if errors.As(err, &ce) {
			ps.add("routes.seed", "must not hold two enabled routes of one path and method (%s and %s, %s)", ce.A, ce.B, ce.Method)
		}
	}
}

// routeProblem records a routes error under at (a *routes.FieldError names the key below it).
func routeProblem(ps *problems, at string, err error) {
	var fe *routes.FieldError
	if !errors.As(err, &fe) {
		ps.add(at, "%v", err)
		return
	}
	path := at
	if fe.Field != "" {
		if fe.Field[0] == '[' {
			path += fe.Field
		} else {
			path += "." + fe.Field
		}
	}
	ps.add(path, "%s", fe.Msg)
}
