package claimcheck

import "errors"

var (
	// ErrNotFound: no pack for the claim, or its position is past the end of its pack's index.
	ErrNotFound = errors.New("claimcheck: claim not found")
	// ErrInvalidClaim: the tenant is not [A-Za-z0-9_-]{1,64} or the id not a canonical uppercase ULID.
	ErrInvalidClaim = errors.New("claimcheck: invalid tenant or claim id")
	// ErrCorruptPack: the pack's bytes do not follow the pack format (a truncated or foreign object).
	ErrCorruptPack = errors.New("claimcheck: corrupt pack")
)
