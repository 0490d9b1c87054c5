package verify

import (
	"errors"
	"strings"
)

// Reasons a request fails verification (Result.Reason). Verify returns them bare, never wrapped, so the
// failure path allocates nothing: a flood of forged requests costs no garbage.
var (
	// ErrNoMatch: the request carried well-formed proof, but none matched a configured key.
	ErrNoMatch = errors.New("verify: no signature matched")
	// ErrMissingSignature: the signature header, or a header the signed content covers, is absent.
	ErrMissingSignature = errors.New("verify: signature missing")
	// ErrMalformedSignature: the signature header, or its timestamp, cannot be parsed or decoded.
	ErrMalformedSignature = errors.New("verify: signature malformed")
	// ErrBadSecret: the verifier holds no usable key; every request fails (fail closed). New also wraps it
	// when a secret or public key cannot be decoded.
	ErrBadSecret = errors.New("verify: no usable secret")
	// ErrBadScheme: the spec describes no scheme this package can run (wrapped by New's *SpecError).
	ErrBadScheme = errors.New("verify: bad scheme")
	// ErrTimestampOutOfWindow: the signed timestamp is further from now than tolerance_seconds.
	ErrTimestampOutOfWindow = errors.New("verify: timestamp outside the tolerance window")
	// ErrMissingTimestamp: the scheme signs a timestamp and the request carries none.
	ErrMissingTimestamp = errors.New("verify: timestamp missing")
	// ErrMissingCredential: no well-formed credential at the configured token location.
	ErrMissingCredential = errors.New("verify: credential missing")
	// ErrCertificateMismatch: the client certificate matches no configured pin.
	ErrCertificateMismatch = errors.New("verify: client certificate matches no pin")
	// ErrNoCertificate: the source pins a client certificate and the connection presented none.
	ErrNoCertificate = errors.New("verify: no client certificate")
)

// Problem is one reason Validate refuses a Spec.
type Problem struct {
	// Field is the key path relative to the verify block ("secret[1]", "signature_header"); the config
	// package prefixes it with "sources.<id>.verify.".
	Field string
	// Msg says what is wrong; it never holds a secret's value.
	Msg string

	kind error // ErrBadScheme or ErrBadSecret, surfaced by SpecError.Unwrap
}

func (p Problem) String() string { return p.Field + ": " + p.Msg }

// SpecError is New's answer to a Spec that Validate refuses. errors.Is(err, ErrBadSecret) holds when a
// secret or public key is unusable, errors.Is(err, ErrBadScheme) when anything else is wrong.
type SpecError struct{ Problems []Problem }

func (e *SpecError) Error() string {
	var b strings.Builder
	b.WriteString("verify: invalid spec: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap lists the distinct kinds of the problems, for errors.Is.
func (e *SpecError) Unwrap() []error {
	var kinds []error
	for _, p := range e.Problems {
		k := p.kind
		if k == nil {
			k = ErrBadScheme
		}
		dup := false
		for _, seen := range kinds {
			dup = dup || seen == k
		}
		if !dup {
			kinds = append(kinds, k)
		}
	}
	return kinds
}
