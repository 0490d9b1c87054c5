package edge

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/verify"
)

// Sentinel errors of the edge.
var (
	// ErrUnknownSource: the URL names no source this node serves (404 unknown_source).
	ErrUnknownSource = errors.New("edge: unknown source")
	// ErrSourcesUnavailable: the source store cannot answer; never reported as unknown (503).
	ErrSourcesUnavailable = errors.New("edge: source store unavailable")
	// ErrBatcherStopped answers a record its batcher dropped when it stopped or crashed.
	ErrBatcherStopped = errors.New("edge: batcher stopped before the record was committed")
)

// RefusedError is a request the edge refuses, with the status, machine-readable reason
// and Retry-After (seconds, 0 = none) the design names for it.
type RefusedError struct {
	Status     int
	Reason     string
	RetryAfter int
	// Detail adds the one field some reasons carry: header name, size limit, read error.
	Detail refusalDetail
}

type refusalDetail struct {
	key   string
	value string // already JSON-encoded
}

func (e *RefusedError) Error() string {
	return "edge: refused " + strconv.Itoa(e.Status) + " " + e.Reason
}

var (
	refuseNotFound       = &RefusedError{Status: 404, Reason: "not_found"}
	refuseUnknownSource  = &RefusedError{Status: 404, Reason: "unknown_source"}
	refuseOverload       = &RefusedError{Status: 503, Reason: "overload", RetryAfter: 1}
	refuseStore          = &RefusedError{Status: 503, Reason: "store_unavailable", RetryAfter: 1}
	refuseDeadline       = &RefusedError{Status: 503, Reason: "deadline_exceeded", RetryAfter: 1}
	refuseBadRequest     = &RefusedError{Status: 400, Reason: "bad_request"}
	refuseDedupeQuota    = &RefusedError{Status: 503, Reason: "dedupe_quota", RetryAfter: 60}
	refuseQuarantineFull = &RefusedError{Status: 503, Reason: "quarantine_full", RetryAfter: 60}
	refuseTenantOverload = &RefusedError{Status: 429, Reason: "tenant_overload", RetryAfter: 1}
	refuseTooManyConns   = &RefusedError{Status: 429, Reason: "too_many_connections", RetryAfter: 1}
	// refuseDedupePending: another node holds the event key pending (fleet dedupe); its commit may still fail.
	refuseDedupePending = &RefusedError{Status: 409, Reason: "dedupe_pending", RetryAfter: 1}
	// refuseTenantErasing: the tenant is being erased; nothing of it is taken until the erase is done.
	refuseTenantErasing = &RefusedError{Status: 503, Reason: "tenant_erasing", RetryAfter: 5}
	// refuseBodyRead carries no detail: the read error's text names the node's addresses.
	refuseBodyRead       = &RefusedError{Status: 400, Reason: "body_read_failed"}
	refuseLengthRequired = &RefusedError{Status: 411, Reason: "length_required"}
	refuseInternal       = &RefusedError{Status: 500, Reason: "internal"}
)

// Errors of ingest steps that refusalOf maps to their answer.
var (
	// errDeadline: the record's group did not start before its deadline; it was expired
	// and never commits.
	errDeadline = errors.New("edge: record deadline passed before its group started")
	// errDedupeLookup: the dedupe fast path could not read the store.
	errDedupeLookup = errors.New("edge: cannot look up the dedupe key")
)

// refusalOf is the one map from an ingest step's error to the answer and the outcome
// label it is counted under. A step returns a *RefusedError when the answer carries a
// detail only the step knows (a limit, a header name, a wait); anything else is mapped
// here: the store's errors are 503 store_unavailable unless named.
func refusalOf(err error) (*RefusedError, string) {
	var r *RefusedError
	switch {
	case errors.As(err, &r):
	case errors.Is(err, ErrUnknownSource):
		r = refuseUnknownSource
	case errors.Is(err, errDeadline):
		r = refuseDeadline
	case errors.Is(err, errDedupeLookup):
		r = refuseStore
	case errors.Is(err, store.ErrDedupeQuota):
		r = refuseDedupeQuota
	default:
		r = refuseStore
	}
	if r.Reason == "verification_failed" {
		// A forgery refused under on_verify_failure reject.
		return r, "rejected"
	}
	return r, r.Reason
}

func refuseTooLarge(limit int64) *RefusedError {
	return &RefusedError{Status: 413, Reason: "payload_too_large", Detail: refusalDetail{"limit", strconv.FormatInt(limit, 10)}}
}

func refuseInvalidHeader(name []byte, nameOK bool) *RefusedError {
	v := "null"
	if nameOK {
		v = jsonString(string(name))
	}
	return &RefusedError{Status: 400, Reason: "invalid_header", Detail: refusalDetail{"header", v}}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// refuseVerification is the 401 of a failed signature under on_verify_failure reject;
// the reason names the check that failed, never a secret.
func refuseVerification(reason error) *RefusedError {
	return &RefusedError{Status: 401, Reason: "verification_failed", Detail: refusalDetail{"reason", `"` + verifyReason(reason) + `"`}}
}

// verifyReasons names each verification failure for answers and the pen.
var verifyReasons = map[error]string{
	verify.ErrNoMatch:              "no_match",
	verify.ErrMissingSignature:     "missing_signature",
	verify.ErrMalformedSignature:   "malformed_signature",
	verify.ErrBadSecret:            "bad_secret",
	verify.ErrBadScheme:            "bad_scheme",
	verify.ErrTimestampOutOfWindow: "timestamp_out_of_window",
	verify.ErrMissingTimestamp:     "missing_timestamp",
	verify.ErrMissingCredential:    "missing_credential",
	verify.ErrCertificateMismatch:  "certificate_mismatch",
	verify.ErrNoCertificate:        "no_certificate",
}

// verifyReason names a verification failure; verifiers return the sentinels bare, and
// anything else reads as a mismatch.
func verifyReason(reason error) string {
	if name, ok := verifyReasons[reason]; ok {
		return name
	}
	return "no_match"
}
