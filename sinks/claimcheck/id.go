package claimcheck

import (
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ankusa-go/ankusa/sinks/message"
)

// MaxClaimsPerPack is the number of positions a 16-bit field holds.
const MaxClaimsPerPack = 1 << 16

// ClaimID is a claim id: a ULID whose last two bytes are the position in its pack.
type ClaimID ulid.ULID

// ParseClaimID parses a canonical uppercase ULID ([0-7][0-9A-HJKMNP-TV-Z]{25}); anything else, lowercase
// included, is ErrInvalidClaim.
func ParseClaimID(s string) (ClaimID, error) {
	id, err := ulid.ParseStrict(s)
	if err != nil || id.String() != s {
		return ClaimID{}, ErrInvalidClaim
	}
	return ClaimID(id), nil
}

// String is the canonical text.
func (c ClaimID) String() string { return ulid.ULID(c).String() }

// Position is the claim's index in its pack.
func (c ClaimID) Position() int { return int(c[14])<<8 | int(c[15]) }

// Pack is the pack id: the claim id with the position zeroed.
func (c ClaimID) Pack() ClaimID {
	c[14], c[15] = 0, 0
	return c
}

// Time is the pack time.
func (c ClaimID) Time() time.Time { return ulid.Time(ulid.ULID(c).Time()) }

// WithPosition is the claim at position pos of pack c.
func (c ClaimID) WithPosition(pos int) ClaimID {
	c[14], c[15] = byte(pos>>8), byte(pos)
	return c
}

// newPackID builds a pack id from its time and 8 bytes of entropy, position zero.
func newPackID(t time.Time, entropy [8]byte) ClaimID {
	var id ulid.ULID
	if err := id.SetTime(ulid.Timestamp(t)); err != nil {
		// Only a time past the year 10889 fails; the clock is broken, not the input.
		panic(fmt.Sprintf("claimcheck: pack time %v out of the ULID range", t))
	}
	copy(id[6:14], entropy[:])
	return ClaimID(id)
}

// PackKey is the key of the pack holding claim id of tenant (never prefixed).
func PackKey(tenant string, id ClaimID) string {
	return TenantPrefix(tenant) + "dt=" + id.Time().UTC().Format(time.DateOnly) + "/" + id.Pack().String()
}

// TenantPrefix is the key prefix of every pack of tenant (a tenant erase deletes under it).
func TenantPrefix(tenant string) string { return "claims/tenant=" + tenant + "/" }

// Ref is the claim ref a message carries: urn:ankusa:claim:v1:<tenant>:<claim_id>.
func Ref(tenant string, id ClaimID) string { return message.ClaimRef(tenant, id.String()) }

// ParseRef splits a claim ref into its tenant and claim id; anything else is ErrInvalidClaim.
func ParseRef(ref string) (string, ClaimID, error) {
	t, s, err := message.ParseClaimRef(ref)
	if err != nil {
		return "", ClaimID{}, ErrInvalidClaim
	}
	id, err := ParseClaimID(s)
	return t, id, err
}

// parse validates a tenant and a claim id text (invariant 3).
func parse(tenant, id string) (ClaimID, error) {
	if !message.ValidTenant(tenant) {
		return ClaimID{}, ErrInvalidClaim
	}
	return ParseClaimID(id)
}
