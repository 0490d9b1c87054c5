package routes

import (
	"errors"
	"net/netip"
	"testing"
)

func TestRulesFirstMatchThenDefault(t *testing.T) {
	r, canon, err := ParseRules(RulesSpec{Default: "deny", Rules: []RuleSpec{
		{Action: "deny", CIDR: "10.1.0.0/16"},
		{Action: "allow", CIDR: "10.0.0.0/8"},
		{Action: "allow", CIDR: "2001:db8::/32"},
		{Action: "allow", CIDR: "192.0.2.7"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if canon.Rules[3].CIDR != "192.0.2.7/32" || canon.Default != "deny" {
		t.Errorf("canonical form %+v", canon)
	}
	for ip, want := range map[string]bool{
		"10.1.2.3": false, "10.2.0.1": true, "11.0.0.1": false, "2001:db8::9": true, "2001:db9::1": false,
		"192.0.2.7": true, "192.0.2.8": false,
	} {
		if got, _ := r.decide(netip.MustParseAddr(ip)); got != want {
			t.Errorf("decide(%s) = %v, want %v", ip, got, want)
		}
	}
	// An empty default is allow; a CIDR is masked.
	r, canon, err = ParseRules(RulesSpec{Rules: []RuleSpec{{Action: "deny", CIDR: "10.9.9.9/8"}}})
	if err != nil || canon.Default != "allow" || canon.Rules[0].CIDR != "10.0.0.0/8" {
		t.Fatalf("%+v %v", canon, err)
	}
	if ok, _ := r.decide(netip.MustParseAddr("10.200.0.1")); ok {
		t.Error("the masked deny rule did not match")
	}
}

// Inventory A.6: "IPv4-mapped IPv6 CIDRs (::ffff:0:0/96) refused at write time."
func TestRulesRefuseMappedAndMalformed(t *testing.T) {
	for spec, field := range map[RuleSpec]string{
		{Action: "deny", CIDR: "::ffff:0:0/96"}:       "rules[0].cidr",
		{Action: "deny", CIDR: "::ffff:10.0.0.0/104"}: "rules[0].cidr",
		{Action: "deny", CIDR: "::ffff:10.0.0.1"}:     "rules[0].cidr",
		{Action: "deny", CIDR: "fe80::1%eth0"}:        "rules[0].cidr",
		{Action: "deny", CIDR: "10.0.0.0/33"}:         "rules[0].cidr",
		{Action: "deny", CIDR: "localhost"}:           "rules[0].cidr",
		{Action: "block", CIDR: "10.0.0.0/8"}:         "rules[0].action",
	} {
		_, _, err := ParseRules(RulesSpec{Rules: []RuleSpec{spec}})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%+v: %v, want a FieldError on %s", spec, err, field)
		}
	}
	if _, _, err := ParseRules(RulesSpec{Default: "maybe"}); err == nil {
		t.Error("default maybe accepted")
	}
}
