package sinks

import "testing"

func TestTemplate(t *testing.T) {
	e := &Envelope{IDText: "id1", Source: "gh", DedupeKey: "d"}
	f := func(tmpl string, ok bool, want string) {
		t.Helper()
		tp, got := ParseTemplate(tmpl)
		if got != ok {
			t.Fatalf("ParseTemplate(%q) ok = %v, want %v", tmpl, got, ok)
		}
		if s := string(tp.Append(nil, e)); ok && s != want {
			t.Fatalf("%q expands to %q, want %q", tmpl, s, want)
		}
	}
	f("{tenant}/{source_id}", true, "default/gh")
	f("x-{id}:{dedupe_key}", true, "x-id1:d")
	f("{idempotency_key}", true, "default:gh:d")
	f("plain", true, "plain")
	f("", true, "")
	f("{nope}", false, "")
	f("{tenant", false, "")
	f("tenant}", false, "")
	f("{}", false, "")
	e.Tenant = "acme"
	f("{tenant}.{source_id}", true, "acme.gh")
}
