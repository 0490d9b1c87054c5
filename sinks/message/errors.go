package message

import "errors"

// Code names why Decode (or Redeem) refused a message; the set is shared with the SDKs (inventory D.4).
type Code string

// Decode error codes.
const (
	CodeInvalidJSON        Code = "invalid_json"        // not JSON
	CodeNotAnObject        Code = "not_an_object"       // JSON, but not an object
	CodeUnsupportedVersion Code = "unsupported_version" // v missing or not 1
	CodeInvalidField       Code = "invalid_field"       // a known field has the wrong type or form, or is missing
	CodeAmbiguousBody      Code = "ambiguous_body"      // both body_base64 and claim
	CodeMissingBody        Code = "missing_body"        // neither body_base64 nor claim
	CodeInvalidBodyBase64  Code = "invalid_body_base64" // body_base64 is not padded standard base64
	CodeSizeMismatch       Code = "size_mismatch"       // the body's length is not size
	CodeIntegrity          Code = "integrity"           // the body's SHA-256 is not sha256
	CodeTenantMismatch     Code = "tenant_mismatch"     // the claim's tenant is not tenant_id
)

// DecodeError is a refused message. Field names the offending field when there is one.
type DecodeError struct {
	Code  Code
	Field string
	Err   error // the underlying cause, if any
}

func (e *DecodeError) Error() string {
	msg := "message: " + string(e.Code)
	if e.Field != "" {
		msg += ": " + e.Field
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ErrClaimNotFound is returned by Redeem when the gateway answers 404: the claim expired or never existed.
var ErrClaimNotFound = errors.New("message: claim not found")

// ErrNotClaim is returned by ParseClaimRef for a string that is not a v1 claim ref.
var ErrNotClaim = errors.New("message: not a v1 claim ref")

func fieldErr(field string, err error) *DecodeError {
	return &DecodeError{Code: CodeInvalidField, Field: field, Err: err}
}
