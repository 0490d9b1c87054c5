package routes

import (
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkRouteGuard decides requests against a table of 10,000 routes (literal, parameter and tail patterns,
// a tenth with their own IP rules) under global rules, as the edge does before reading a body. allocs/op is
// the figure the hot path is held to: zero.
func BenchmarkRouteGuard(b *testing.B) {
	var list []*Route
	for i := range 10_000 {
		s := Spec{ID: fmt.Sprintf("r%05d", i)}
		switch i % 3 {
		case 0:
			s.Path = fmt.Sprintf("/webhooks/app%d/events", i)
		case 1:
			s.Path = fmt.Sprintf("/hooks/t%d/:source", i)
		default:
			s.Path = fmt.Sprintf("/catch/c%d/*", i)
		}
		if i%10 == 0 {
			s.IPRules = &RulesSpec{Default: "deny", Rules: []RuleSpec{{Action: "allow", CIDR: "192.0.2.0/24"}}}
		}
		list = append(list, mustRoute(b, s))
	}
	snap, err := Build(list, RulesSpec{Rules: []RuleSpec{
		{Action: "deny", CIDR: "203.0.113.0/24"}, {Action: "deny", CIDR: "2001:db8:dead::/48"},
	}}, Proxies{netip.MustParsePrefix("10.0.0.0/8")})
	if err != nil {
		b.Fatal(err)
	}
	t := NewTable()
	t.Publish(snap)
	paths := [][]byte{
		[]byte("/webhooks/app3000/events"), []byte("/hooks/t4000/github"), []byte("/catch/c5000/a/b/c"),
		[]byte("/webhooks/app3001/events"), []byte("/nowhere/at/all"),
	}
	method := []byte("POST")
	peer := netip.MustParseAddr("10.1.2.3")
	xff := [][]byte{[]byte("192.0.2.44, 10.0.0.9")}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s := t.Load()
			ip := ClientIP(peer, xff, s.Proxies())
			_ = s.Decide(method, paths[i%len(paths)], ip)
			i++
		}
	})
}
