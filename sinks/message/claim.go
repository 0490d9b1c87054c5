package message

import "strings"

// ClaimPrefix starts every v1 claim ref (inventory D.5).
const ClaimPrefix = "urn:ankusa:claim:v1:"

// ClaimRef returns the ref of claim id in tenant's namespace. It does not validate: ParseClaimRef does.
func ClaimRef(tenant, id string) string { return ClaimPrefix + tenant + ":" + id }

// ParseClaimRef splits a v1 claim ref into its tenant ([A-Za-z0-9_-]{1,64}) and claim id (canonical
// uppercase ULID, [0-7][0-9A-HJKMNP-TV-Z]{25}); anything else is ErrNotClaim. Both parts are safe in a URL
// path as they are.
func ParseClaimRef(ref string) (tenant, id string, err error) {
	rest, ok := strings.CutPrefix(ref, ClaimPrefix)
	if !ok {
		return "", "", ErrNotClaim
	}
	tenant, id, ok = strings.Cut(rest, ":")
	if !ok || !ValidTenant(tenant) || !validULID(id) {
		return "", "", ErrNotClaim
	}
	return tenant, id, nil
}

// ValidTenant reports whether t can name a tenant in a claim ref: [A-Za-z0-9_-]{1,64}.
func ValidTenant(t string) bool {
	if len(t) == 0 || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validULID reports whether s is a canonical uppercase ULID (Crockford base32, first digit 0-7 so the
// 128 bits do not overflow).
func validULID(s string) bool {
	if len(s) != 26 || s[0] < '0' || s[0] > '7' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
		case 'A' <= c && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U':
		default:
			return false
		}
	}
	return true
}
