package config

import (
	"strings"
	"testing"
)

// Inventory B.3 routes.*: each refused value names its key path.
func TestRoutesRefusalsNameTheirKey(t *testing.T) {
	for _, c := range []struct{ yml, path, msg string }{
		{"routes: {ip_denied_status: 401}", "routes.ip_denied_status", "must be 403 or 404"},
		{"routes: {max_routes: 0}", "routes.max_routes", "must be > 0"},
		{"routes: {store: {type: redis}}", "routes.store.type", "must be one of local"},
		{"routes: {trusted_proxies: ['10.0.0.0/8', '::ffff:0:0/96']}", "routes.trusted_proxies[1]", "IPv4-mapped"},
		{"routes: {ip_rules: {default: maybe}}", "routes.ip_rules.default", "must be allow or deny"},
		{"routes: {ip_rules: {rules: [{action: deny, cidr: 'nope'}]}}", "routes.ip_rules.rules[0].cidr", "must be a CIDR"},
		{"routes: {seed: [{id: a, path: '/a/%2F'}]}", "routes.seed[0].path", "encoded slash"},
		{"routes: {seed: [{id: A, path: '/a'}]}", "routes.seed[0].id", "lowercase slug"},
		{"routes: {seed: [{id: a, path: '/a'}, {id: a, path: '/b'}]}", "routes.seed[1].id", "must be unique"},
		{"routes: {seed: [{id: a, path: '/h/:x'}, {id: b, path: '/h/:y'}]}", "routes.seed", "one path and method"},
		{"routes: {seed: [{id: a, path: '/a', methods: [BREW]}]}", "routes.seed[0].methods[0]", "must be one of"},
	} {
		_, err := Parse([]byte(c.yml), envOf(nil))
		found := false
		for _, p := range problemsOf(t, err) {
			if p.Path == c.path && strings.Contains(p.Msg, c.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %v, want %s %q", c.yml, err, c.path, c.msg)
		}
	}
	cfg := mustParse(t, `routes: {enabled: true, trusted_proxies: [10.0.0.0/8], ip_denied_status: 404,
  ip_rules: {default: deny, rules: [{action: allow, cidr: 192.0.2.0/24}]},
  seed: [{id: github, path: /webhooks/github, methods: [POST], metadata: {team: a}}]}`, nil)
	if !cfg.Routes.Enabled || len(cfg.Routes.Seed) != 1 || cfg.Routes.IPRules.Default != "deny" {
		t.Fatalf("%+v", cfg.Routes)
	}
}
