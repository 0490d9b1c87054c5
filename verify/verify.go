package verify

import (
	"crypto/x509"
	"time"
)

// Request is what a verifier may read of an incoming hook. The verifier keeps no reference to it.
type Request struct {
	// Body is the exact body bytes: signatures cover the bytes as sent, never a re-serialised copy.
	Body []byte
	// Header looks a header up case-insensitively; nil or empty when absent (both read as absent).
	Header func(name string) []byte
	// Query looks a query-string parameter up; may be nil when the request has none.
	Query func(name string) []byte
	// RawQuery is the request's query string as sent (without '?'), nil when it has none: twilio signs it
	// as part of the URL.
	RawQuery []byte
	// PeerCert is the TLS client certificate when the listener did mutual TLS, else nil.
	PeerCert *x509.Certificate
	// Now judges timestamps: the receive time, or a quarantined hook's received_at on release. A zero
	// Now puts every timestamp out of the window, so a caller that forgets it fails closed.
	Now time.Time
}

// Status is the outcome of a verification, stored with the hook.
type Status uint8

// The zero Status is StatusFailed so that a Result nobody filled in never reads as success.
const (
	StatusFailed  Status = iota // the request is not authentic
	StatusOK                    // the request carried proof made with a configured key
	StatusSkipped               // the source verifies nothing (type none)
)

// String is the status as stored and used as a telemetry tag: "ok", "failed", "skipped".
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusSkipped:
		return "skipped"
	}
	return "failed"
}

// Result is one verification's outcome.
type Result struct {
	Status Status
	// Provider is the preset name ("stripe", ...) or "hmac", "ed25519", "token", "client_cert", "none".
	Provider string
	// Scheme is a bounded label for metrics: the preset name, "hmac-<hash>", "v1a", the token location,
	// "pin" or "none".
	Scheme string
	// Reason is nil when Status is not StatusFailed, else one of the package's sentinel errors.
	Reason error
	// HashedBytes is what this verification hashed, summed over every key and signature it tried: the
	// cost of the request in bytes of SHA input. The edge charges a failed verification's to the source's
	// verification budget, so a flood of forgeries cannot spend more CPU than the budget allows.
	HashedBytes int64
	// WeakHash reports a SHA-1 scheme, on every Result of that verifier (matched or not): the edge counts
	// ankusa_verifier_weak_hash_total from it.
	WeakHash bool
}

// Verifier authenticates a request. Implementations are safe for concurrent use and run in the caller's
// goroutine.
type Verifier interface {
	Verify(r *Request) Result
}

// noneVerifier is type none: nothing to check, the hook is stored with status skipped.
type noneVerifier struct{}

func (noneVerifier) Verify(*Request) Result {
	return Result{Status: StatusSkipped, Provider: "none", Scheme: "none"}
}

// header reads a header, treating a nil lookup as a request without headers.
func header(r *Request, name string) []byte {
	if r.Header == nil {
		return nil
	}
	return r.Header(name)
}
