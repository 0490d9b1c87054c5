package routes

import (
	"bytes"
	"net/netip"
	"strconv"
)

// Proxies are routes.trusted_proxies: the addresses whose X-Forwarded-For the guard believes.
type Proxies []netip.Prefix

// ParseProxies parses routes.trusted_proxies (CIDRs or addresses, with ParseCIDR's refusals); the error is a
// *FieldError naming "[i]".
func ParseProxies(list []string) (Proxies, error) {
	out := make(Proxies, 0, len(list))
	for i, s := range list {
		p, err := ParseCIDR(s)
		if err != nil {
			return nil, &FieldError{Field: "[" + strconv.Itoa(i) + "]", Msg: err.(*FieldError).Msg}
		}
		out = append(out, p)
	}
	return out, nil
}

func (ps Proxies) trusts(a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// maxHops bounds the X-Forwarded-For entries one request makes the guard parse.
const maxHops = 32

// ClientIP is the address the guard decides on. It is the socket's peer (unmapped: ::ffff:10.0.0.1 is
// 10.0.0.1), unless that peer is a trusted proxy: then X-Forwarded-For (xff, its header values in the order
// they came) is walked from the right, each trusted hop passed over, and the first hop that is not trusted is
// the client. A malformed hop stops the walk at the last hop that could be read (a proxy we trust), so a
// forged or garbled header never names an address of the caller's choice; so does a walk past maxHops. With
// every hop trusted, the leftmost is the client. Without trusted proxies the header is never read.
func ClientIP(peer netip.Addr, xff [][]byte, trusted Proxies) netip.Addr {
	cur := peer.Unmap()
	if len(trusted) == 0 || !trusted.trusts(cur) {
		return cur
	}
	hops := 0
	for h := len(xff) - 1; h >= 0; h-- {
		v := xff[h]
		for len(v) > 0 {
			i := bytes.LastIndexByte(v, ',')
			entry := v[i+1:]
			if i < 0 {
				entry, v = v, nil
			} else {
				v = v[:i]
			}
			entry = bytes.Trim(entry, " \t")
			if len(entry) == 0 {
				continue // "a, , b": an empty element is no hop
			}
			hops++
			a, ok := parseHop(entry)
			if !ok || hops > maxHops {
				return cur
			}
			cur = a
			if !trusted.trusts(cur) {
				return cur
			}
		}
	}
	return cur
}

// parseHop reads one X-Forwarded-For element: an IPv4 or IPv6 address, an IPv4 address with a port, or a
// bracketed IPv6 address with or without a port. A zone is refused.
func parseHop(b []byte) (netip.Addr, bool) {
	if len(b) == 0 || len(b) > 64 {
		return netip.Addr{}, false
	}
	if b[0] == '[' {
		end := bytes.IndexByte(b, ']')
		if end < 0 || !validPort(b[end+1:], true) {
			return netip.Addr{}, false
		}
		b = b[1:end]
	} else if i := bytes.IndexByte(b, ':'); i >= 0 && bytes.IndexByte(b[i+1:], ':') < 0 {
		if !validPort(b[i:], false) {
			return netip.Addr{}, false
		}
		b = b[:i]
	}
	if a, ok := parseIPv4(b); ok {
		return a, true
	}
	a, err := netip.ParseAddr(string(b))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// validPort accepts ":digits" (or nothing when optional).
func validPort(b []byte, optional bool) bool {
	if len(b) == 0 {
		return optional
	}
	if b[0] != ':' || len(b) < 2 || len(b) > 6 {
		return false
	}
	for _, c := range b[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseIPv4 reads a dotted-quad IPv4 address (no leading zeros, as netip) without allocating: the common hop.
func parseIPv4(b []byte) (netip.Addr, bool) {
	var out [4]byte
	part, digits, val := 0, 0, 0
	for i := 0; i <= len(b); i++ {
		if i == len(b) || b[i] == '.' {
			if digits == 0 || part > 3 {
				return netip.Addr{}, false
			}
			out[part] = byte(val)
			part, digits, val = part+1, 0, 0
			continue
		}
		c := b[i]
		if c < '0' || c > '9' || digits > 0 && val == 0 {
			return netip.Addr{}, false
		}
		val = val*10 + int(c-'0')
		digits++
		if val > 255 {
			return netip.Addr{}, false
		}
	}
	if part != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(out), true
}
