// Package verify holds the verifiers that authenticate incoming webhooks: one HMAC engine driven by a
// declarative scheme (the stripe, github, shopify, slack and standard_webhooks presets and inline `hmac`
// schemes), Ed25519 (Standard Webhooks v1a), static tokens and pinned mTLS client certificates.
//
// The invariant it owns: a verifier never reports StatusOK unless the request carries proof made with a
// configured key, checked in constant time. Concretely:
//
//  1. Every configured secret is tried (a rotation list, newest first, at most 8); any one may match.
//     Ed25519 stops after MaxSignatureChecks (signature, key) checks: every key against the first
//     signatures offered.
//  2. A verifier that holds no usable key fails every request with ErrBadSecret: it fails closed, never open.
//     New refuses a secret it cannot decode, so a bad key stops the boot rather than a request.
//  3. Signed timestamps are integer unix seconds judged against Request.Now; |now - ts| > tolerance fails.
//     SHA-1 schemes have their tolerance capped at one hour and flag every Result WeakHash, matched or not.
//  4. A forged request's cost is bounded and reported (Result.HashedBytes): a malformed signature header
//     (a signature of the scheme that does not decode, more than MaxCandidates) or a missing or stale
//     timestamp is refused before any hashing; an HMAC hashes the signed content once per key whatever
//     the signatures offered; Ed25519 makes at most MaxSignatureChecks checks.
//  5. Keys are decoded once, in New; the request path allocates nothing in the steady state (a failed
//     Ed25519 check aside: crypto/ed25519 allocates its error) and starts no goroutine, so it runs in the
//     request's own goroutine.
//
// The package depends on the standard library only (and the YAML decoder interface for Secrets), never on
// the rest of the project. It is a leaf outside every role package so that both may import it: the config
// package embeds Spec and validates it at boot, the edge calls Verifier.Verify.
package verify
