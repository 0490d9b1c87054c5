package routes

import (
	"bytes"
	"net/netip"
	"testing"
)

// FuzzRoutePattern: any accepted pattern is re-parsed to the same shape, holds no dot segment or encoded
// slash, and matching it never panics.
func FuzzRoutePattern(f *testing.F) {
	for _, s := range []string{"/", "/a", "/a/:b", "/a/*", "/a/%2F", "/a/%2e%2e", "/a//b", "/:x/:x", "/a/b%20c/*", "/a:b@c"} {
		f.Add(s, "/a/b")
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		p, err := ParsePattern(pattern)
		if err != nil {
			return
		}
		again, err := ParsePattern(p.String())
		if err != nil || again.shape() != p.shape() {
			t.Fatalf("re-parse of %q: %v", pattern, err)
		}
		for _, s := range p.segs {
			if s.kind == segLiteral && (s.lit == "." || s.lit == ".." || bytes.IndexByte([]byte(s.lit), '/') >= 0) {
				t.Fatalf("%q kept segment %q", pattern, s.lit)
			}
		}
		r, err := ParseSpec(Spec{ID: "f", Path: pattern})
		if err != nil {
			t.Fatal(err)
		}
		snap, err := Build([]*Route{r}, RulesSpec{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := snap.Decide([]byte("POST"), []byte(path), netip.MustParseAddr("192.0.2.1"))
		if d.Allow != p.Match(path) {
			t.Fatalf("trie and Pattern.Match disagree on %q against %q: %v", pattern, path, d.Allow)
		}
	})
}

// FuzzClientIP: whatever the header, the client is the peer or one of the header's addresses, and an
// untrusted peer is always the client.
func FuzzClientIP(f *testing.F) {
	for _, s := range []string{"203.0.113.9", "1.1.1.1, 10.0.0.2", "[2001:db8::1]:80", "bogus", " , ,", "::ffff:1.2.3.4", "fe80::1%lo"} {
		f.Add([]byte(s), true)
	}
	proxies := Proxies{netip.MustParsePrefix("10.0.0.0/8")}
	f.Fuzz(func(t *testing.T, xff []byte, trustedPeer bool) {
		peer := netip.MustParseAddr("198.51.100.1")
		if trustedPeer {
			peer = netip.MustParseAddr("10.0.0.1")
		}
		got := ClientIP(peer, [][]byte{xff}, proxies)
		if !trustedPeer && got != peer {
			t.Fatalf("untrusted peer replaced by %s", got)
		}
		if got == peer {
			return
		}
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("client %v", got)
		}
		if !bytes.Contains(xff, []byte(got.String())) && !bytes.Contains(bytes.ToLower(xff), []byte(got.StringExpanded())) {
			// The header may write the address another way (leading zeros are refused by netip, case is not).
			found := false
			for _, part := range bytes.Split(xff, []byte(",")) {
				if a, ok := parseHop(bytes.Trim(part, " \t")); ok && a == got {
					found = true
				}
			}
			if !found {
				t.Fatalf("client %s is not in the header %q", got, xff)
			}
		}
	})
}
