package routes

import (
	"net/netip"
	"strconv"
)

// IP rules (inventory A.6, B.3 routes.ip_rules): {default: allow|deny, rules: [{action, cidr}]}. The first rule
// whose CIDR holds the client address decides; none does, the default decides. The global rules are checked
// before the route is looked up, the route's own after it matched.

// Actions of a rule and of a default.
const (
	ActionAllow = "allow"
	ActionDeny  = "deny"
)

// maxRules bounds one rule list: a decision scans it.
const maxRules = 1000

// RulesSpec is the written form of a rule set (YAML, JSON).
type RulesSpec struct {
	Default string     `json:"default" yaml:"default"`
	Rules   []RuleSpec `json:"rules" yaml:"rules"`
}

// RuleSpec is one written rule.
type RuleSpec struct {
	Action string `json:"action" yaml:"action"`
	CIDR   string `json:"cidr" yaml:"cidr"`
}

// Rules is a parsed rule set.
type Rules struct {
	deny  bool // the default
	rules []rule
}

type rule struct {
	deny   bool
	prefix netip.Prefix
	cidr   string // canonical, for the dry run's answer
}

// AllowAll is the rule set of a route or a node that sets none.
var AllowAll = Rules{}

// ParseRules parses and canonicalizes a rule set: an empty default is allow; a CIDR is masked (10.1.2.3/8 is
// 10.0.0.0/8) and a bare address is its own /32 or /128. The error is a *FieldError ("default",
// "rules[i].action", "rules[i].cidr").
func ParseRules(s RulesSpec) (Rules, RulesSpec, error) {
	var r Rules
	canon := RulesSpec{Default: ActionAllow, Rules: make([]RuleSpec, 0, len(s.Rules))}
	switch s.Default {
	case "", ActionAllow:
	case ActionDeny:
		r.deny, canon.Default = true, ActionDeny
	default:
		return Rules{}, RulesSpec{}, fieldErr("default", "must be allow or deny")
	}
	if len(s.Rules) > maxRules {
		return Rules{}, RulesSpec{}, fieldErr("rules", "must hold at most %d rules", maxRules)
	}
	for i, rs := range s.Rules {
		at := "rules[" + strconv.Itoa(i) + "]"
		var x rule
		switch rs.Action {
		case ActionAllow:
		case ActionDeny:
			x.deny = true
		default:
			return Rules{}, RulesSpec{}, fieldErr(at+".action", "must be allow or deny")
		}
		p, err := ParseCIDR(rs.CIDR)
		if err != nil {
			return Rules{}, RulesSpec{}, within(at, err)
		}
		x.prefix, x.cidr = p, p.String()
		r.rules = append(r.rules, x)
		canon.Rules = append(canon.Rules, RuleSpec{Action: rs.Action, CIDR: x.cidr})
	}
	return r, canon, nil
}

// ParseCIDR parses a CIDR or a bare address into a masked prefix. An IPv4-mapped IPv6 prefix (::ffff:0:0/96
// and anything inside it) is refused: client addresses are unmapped before they are matched, so such a rule
// would never match; write the IPv4 CIDR instead. A zone is refused. The error is a *FieldError ("cidr").
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil {
			return netip.Prefix{}, fieldErr("cidr", "must be a CIDR (10.0.0.0/8, 2001:db8::/32) or an address")
		}
		if a.Zone() != "" {
			return netip.Prefix{}, fieldErr("cidr", "must not name a zone")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	a := p.Addr()
	if a.Is4In6() {
		return netip.Prefix{}, fieldErr("cidr", "must not be an IPv4-mapped IPv6 prefix (::ffff:0:0/96); write the IPv4 CIDR")
	}
	return p.Masked(), nil
}

// decide returns whether ip is allowed, and the index of the deciding rule (-1: the default).
func (r *Rules) decide(ip netip.Addr) (bool, int) {
	for i := range r.rules {
		if r.rules[i].prefix.Contains(ip) {
			return !r.rules[i].deny, i
		}
	}
	return !r.deny, -1
}

// empty reports whether the set allows everyone without a rule (nothing to decide).
func (r *Rules) empty() bool { return !r.deny && len(r.rules) == 0 }

func (r *Rules) hit(scope string, i int) RuleHit {
	if i < 0 {
		a := ActionAllow
		if r.deny {
			a = ActionDeny
		}
		return RuleHit{Scope: scope, Action: a}
	}
	a := ActionAllow
	if r.rules[i].deny {
		a = ActionDeny
	}
	return RuleHit{Scope: scope, Action: a, CIDR: r.rules[i].cidr}
}
