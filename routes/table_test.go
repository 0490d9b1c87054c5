package routes

import (
	"errors"
	"net/netip"
	"testing"
)

func mustRoute(t testing.TB, s Spec) *Route {
	t.Helper()
	r, err := ParseSpec(s)
	if err != nil {
		t.Fatalf("ParseSpec(%+v): %v", s, err)
	}
	return r
}

func off() *bool { f := false; return &f }

// Inventory A.2 step 1: "Route guard: IP rules + path/method allowlist → 403/404, nothing read."
func TestDecisionMatrix(t *testing.T) {
	list := []*Route{
		mustRoute(t, Spec{ID: "github", Path: "/webhooks/github"}),
		mustRoute(t, Spec{ID: "any-source", Path: "/webhooks/:source", Methods: []string{"POST", "PUT"}}),
		mustRoute(t, Spec{ID: "catch", Path: "/catch/*"}),
		mustRoute(t, Spec{ID: "office", Path: "/internal/:x", IPRules: &RulesSpec{Default: "deny",
			Rules: []RuleSpec{{Action: "allow", CIDR: "192.0.2.0/24"}}}}),
		mustRoute(t, Spec{ID: "off", Path: "/disabled", Enabled: off()}),
		mustRoute(t, Spec{ID: "root", Path: "/"}),
	}
	s, err := Build(list, RulesSpec{Rules: []RuleSpec{{Action: "deny", CIDR: "203.0.113.0/24"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		allow  bool
		reason string
		route  string
		scope  string
		cidr   string
	}
	cases := []struct {
		method, path, ip string
		want             want
	}{
		{"POST", "/webhooks/github", "198.51.100.1", want{true, ReasonMatched, "github", "global", ""}},
		{"POST", "/webhooks/stripe", "198.51.100.1", want{true, ReasonMatched, "any-source", "global", ""}},
		{"PUT", "/webhooks/github", "198.51.100.1", want{true, ReasonMatched, "any-source", "global", ""}},
		{"GET", "/webhooks/github", "198.51.100.1", want{false, ReasonMethod, "", "global", ""}},
		{"POST", "/webhooks/a/b", "198.51.100.1", want{false, ReasonNoRoute, "", "global", ""}},
		{"POST", "/catch/a/b/c", "198.51.100.1", want{true, ReasonMatched, "catch", "global", ""}},
		{"POST", "/catch", "198.51.100.1", want{false, ReasonNoRoute, "", "global", ""}},
		{"POST", "/disabled", "198.51.100.1", want{false, ReasonNoRoute, "", "global", ""}},
		{"POST", "/", "198.51.100.1", want{true, ReasonMatched, "root", "global", ""}},
		{"POST", "/webhooks/github", "203.0.113.5", want{false, ReasonIPDenied, "", "global", "203.0.113.0/24"}},
		{"POST", "/nowhere", "203.0.113.5", want{false, ReasonIPDenied, "", "global", "203.0.113.0/24"}},
		{"POST", "/internal/x", "192.0.2.9", want{true, ReasonMatched, "office", "route", "192.0.2.0/24"}},
		{"POST", "/internal/x", "198.51.100.1", want{false, ReasonIPDenied, "office", "route", ""}},
		{"POST", "/internal/x", "::ffff:192.0.2.9", want{true, ReasonMatched, "office", "route", "192.0.2.0/24"}},
		{"BREW", "/webhooks/github", "198.51.100.1", want{false, ReasonMethod, "", "global", ""}},
	}
	for _, c := range cases {
		d := s.Decide([]byte(c.method), []byte(c.path), netip.MustParseAddr(c.ip))
		got := want{d.Allow, d.Reason, "", d.Rule.Scope, d.Rule.CIDR}
		if d.Route != nil {
			got.route = d.Route.ID
		}
		if got != c.want {
			t.Errorf("%s %s from %s: %+v, want %+v", c.method, c.path, c.ip, got, c.want)
		}
	}
	// Without global rules nothing decides the address of a route without rules.
	s, _ = Build(list[:1], RulesSpec{}, nil)
	if d := s.Decide([]byte("POST"), []byte("/webhooks/github"), netip.MustParseAddr("203.0.113.5")); !d.Allow || d.Rule.Scope != "" {
		t.Errorf("%+v", d)
	}
	// An empty table refuses everything: no_route.
	if d := NewTable().Load().Decide([]byte("POST"), []byte("/x"), netip.MustParseAddr("192.0.2.1")); d.Allow || d.Reason != ReasonNoRoute {
		t.Errorf("empty table: %+v", d)
	}
}

// The literal wins over the parameter, and a literal branch that fails falls back to the parameter.
func TestMatchBacktracks(t *testing.T) {
	s, err := Build([]*Route{
		mustRoute(t, Spec{ID: "lit", Path: "/a/b/c"}),
		mustRoute(t, Spec{ID: "param", Path: "/a/:x/d"}),
		mustRoute(t, Spec{ID: "tail", Path: "/a/*"}),
	}, RulesSpec{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for path, id := range map[string]string{"/a/b/c": "lit", "/a/b/d": "param", "/a/b/e": "tail", "/a/z": "tail"} {
		d := s.Decide([]byte("POST"), []byte(path), netip.MustParseAddr("192.0.2.1"))
		if d.Route == nil || d.Route.ID != id {
			t.Errorf("%s matched %+v, want %s", path, d.Route, id)
		}
	}
}

// Inventory A.6: "Two enabled routes may not share path+method."
func TestConflictingEnabledRoutesRefused(t *testing.T) {
	a := mustRoute(t, Spec{ID: "a", Path: "/h/:x", Methods: []string{"POST", "PUT"}})
	b := mustRoute(t, Spec{ID: "b", Path: "/h/:y", Methods: []string{"PUT"}})
	_, err := Build([]*Route{a, b}, RulesSpec{}, nil)
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Method != "PUT" {
		t.Fatalf("Build = %v, want a PUT conflict", err)
	}
	b.Enabled = false
	if _, err := Build([]*Route{a, b}, RulesSpec{}, nil); err != nil {
		t.Errorf("a disabled route conflicts: %v", err)
	}
	c := mustRoute(t, Spec{ID: "c", Path: "/h/:y", Methods: []string{"GET"}})
	if _, err := Build([]*Route{a, c}, RulesSpec{}, nil); err != nil {
		t.Errorf("routes of one path and other methods conflict: %v", err)
	}
	if _, err := Build([]*Route{a, a}, RulesSpec{}, nil); !errors.Is(err, ErrDuplicateID) {
		t.Errorf("duplicate id: %v", err)
	}
}

func TestSpecValidation(t *testing.T) {
	for _, c := range []struct {
		spec  Spec
		field string
	}{
		{Spec{ID: "Upper", Path: "/a"}, "id"},
		{Spec{ID: "-a", Path: "/a"}, "id"},
		{Spec{ID: "a", Path: "a"}, "path"},
		{Spec{ID: "a", Path: "/a", Methods: []string{"post"}}, "methods[0]"},
		{Spec{ID: "a", Path: "/a", Tenant: "a b"}, "tenant"},
		{Spec{ID: "a", Path: "/a", IPRules: &RulesSpec{Rules: []RuleSpec{{Action: "deny", CIDR: "::ffff:0:0/96"}}}}, "ip_rules.rules[0].cidr"},
		{Spec{ID: "a", Path: "/a", Metadata: map[string]string{"k": "a\nb"}}, "metadata"},
	} {
		_, err := ParseSpec(c.spec)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: %v, want a FieldError on %s", c.spec, err, c.field)
		}
	}
	r := mustRoute(t, Spec{ID: "a", Path: "/a", Methods: []string{"PUT", "POST", "PUT"}})
	if len(r.Methods) != 2 || r.Methods[0] != "POST" || !r.Enabled {
		t.Errorf("canonical methods %v enabled %v", r.Methods, r.Enabled)
	}
	if string(r.CanonicalSpec()) != `{"id":"a","path":"/a","methods":["POST","PUT"],"enabled":true}` {
		t.Errorf("canonical spec %s", r.CanonicalSpec())
	}
}
