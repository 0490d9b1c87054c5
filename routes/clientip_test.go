package routes

import (
	"net/netip"
	"testing"
)

// Inventory B.3: "routes.trusted_proxies [] (X-Forwarded-For never read)".
func TestClientIPWalksForwardedForFromTheRight(t *testing.T) {
	proxies, err := ParseProxies([]string{"10.0.0.0/8", "192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr
	h := func(v ...string) [][]byte {
		out := make([][]byte, len(v))
		for i, s := range v {
			out[i] = []byte(s)
		}
		return out
	}
	cases := []struct {
		name  string
		peer  string
		xff   [][]byte
		trust Proxies
		want  string
	}{
		{"no proxies: the header is never read", "10.0.0.1", h("203.0.113.9"), nil, "10.0.0.1"},
		{"untrusted peer: the header is ignored", "198.51.100.1", h("203.0.113.9"), proxies, "198.51.100.1"},
		{"trusted peer, one hop", "10.0.0.1", h("203.0.113.9"), proxies, "203.0.113.9"},
		{"trusted chain, rightmost untrusted wins", "10.0.0.1", h("6.6.6.6, 203.0.113.9, 10.2.3.4"), proxies, "203.0.113.9"},
		{"several header lines, walked last first", "10.0.0.1", h("6.6.6.6", "203.0.113.9, 192.0.2.1"), proxies, "203.0.113.9"},
		{"all trusted: the leftmost", "10.0.0.1", h("10.9.9.9, 10.8.8.8"), proxies, "10.9.9.9"},
		{"malformed hop stops at the last trusted", "10.0.0.1", h("6.6.6.6, bogus, 10.2.3.4"), proxies, "10.2.3.4"},
		{"port and brackets", "10.0.0.1", h("[2001:db8::1]:443"), proxies, "2001:db8::1"},
		{"ipv4 with a port", "10.0.0.1", h("203.0.113.9:5555"), proxies, "203.0.113.9"},
		{"mapped peer is unmapped", "::ffff:10.0.0.1", h("203.0.113.9"), proxies, "203.0.113.9"},
		{"mapped hop is unmapped", "10.0.0.1", h("::ffff:203.0.113.9"), proxies, "203.0.113.9"},
		{"zone refused", "10.0.0.1", h("fe80::1%eth0"), proxies, "10.0.0.1"},
		{"empty elements skipped", "10.0.0.1", h(" , 203.0.113.9 ,"), proxies, "203.0.113.9"},
		{"no header", "10.0.0.1", nil, proxies, "10.0.0.1"},
	}
	for _, c := range cases {
		if got := ClientIP(ip(c.peer), c.xff, c.trust); got != ip(c.want) {
			t.Errorf("%s: ClientIP = %s, want %s", c.name, got, c.want)
		}
	}
	if _, err := ParseProxies([]string{"::ffff:0:0/96"}); err == nil {
		t.Error("a mapped trusted proxy was accepted")
	}
}

func TestParseIPv4AgreesWithNetip(t *testing.T) {
	for _, s := range []string{"1.2.3.4", "255.255.255.255", "0.0.0.0", "01.2.3.4", "1.2.3", "1.2.3.4.5", "256.1.1.1",
		"1..2.3", "1.2.3.", "", "a.b.c.d", "1.2.3.4 ", "00.1.2.3"} {
		a, ok := parseIPv4([]byte(s))
		want, err := netip.ParseAddr(s)
		if ok != (err == nil && want.Is4()) || ok && a != want {
			t.Errorf("parseIPv4(%q) = %v %v, netip says %v %v", s, a, ok, want, err)
		}
	}
}
