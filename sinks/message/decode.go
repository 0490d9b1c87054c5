package message

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/ankusa-go/ankusa/sinks"
)

var (
	errMissing  = errors.New("is required")
	errNotStr   = errors.New("must be a string")
	errEmpty    = errors.New("must not be empty")
	errNotInt   = errors.New("must be a non-negative integer")
	errDup      = errors.New("appears twice")
	errNotHex   = errors.New("must be 64 lowercase hex digits")
	errHeaders  = errors.New("must be an object of strings")
	errNotClaim = errors.New("must be a v1 claim ref")
)

// Decode parses and checks one Message v1. Unknown keys are ignored; a key given twice is invalid_field (two
// readers could otherwise see different messages). An inline body is checked against size and sha256 here; a
// claimed one by Redeem. For a claim, its tenant must be tenant_id (sinks.DefaultTenant when tenant_id is
// null). Every refusal is a *DecodeError.
func Decode(b []byte) (*Message, error) {
	if !json.Valid(b) {
		return nil, &DecodeError{Code: CodeInvalidJSON}
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, &DecodeError{Code: CodeNotAnObject}
	}
	fields, err := topLevel(b)
	if err != nil {
		return nil, err
	}

	v, ok := fields["v"]
	if !ok {
		return nil, &DecodeError{Code: CodeUnsupportedVersion, Err: errors.New("no v")}
	}
	if n, err := parseUint(v); err != nil || n != Version {
		return nil, &DecodeError{Code: CodeUnsupportedVersion, Err: fmt.Errorf("v is %.16s", v)}
	}

	m := &Message{}
	var errs []error
	str := func(key string, required bool) string {
		raw, ok := fields[key]
		if !ok || isNull(raw) {
			if required {
				errs = append(errs, fieldErr(key, errMissing))
			}
			return ""
		}
		s, err := unquote(raw)
		if err != nil {
			errs = append(errs, fieldErr(key, errNotStr))
			return ""
		}
		if required && s == "" {
			errs = append(errs, fieldErr(key, errEmpty))
		}
		return s
	}
	num := func(key string) int64 {
		raw, ok := fields[key]
		if !ok {
			errs = append(errs, fieldErr(key, errMissing))
			return 0
		}
		n, err := parseUint(raw)
		if err != nil {
			errs = append(errs, fieldErr(key, errNotInt))
		}
		return n
	}
	m.ID = str("id", true)
	m.SourceID = str("source_id", true)
	m.TenantID = str("tenant_id", false)
	m.ReceivedAt = num("received_at")
	m.ContentType = str("content_type", false)
	m.Size = num("size")
	m.SHA256 = str("sha256", true)
	if m.SHA256 != "" && !lowerHex64(m.SHA256) {
		errs = append(errs, fieldErr("sha256", errNotHex))
	}
	m.DedupeKey = str("dedupe_key", false)
	m.ReplayID = str("replay_id", false)
	m.IdempotencyKey = str("idempotency_key", true)
	if raw, ok := fields["headers"]; ok && !isNull(raw) {
		hs, err := decodeHeaders(raw)
		if err != nil {
			errs = append(errs, err)
		}
		m.Headers = hs
	}
	m.Verification = str("verification", false)
	m.Instance = str("instance", false)
	if len(errs) > 0 {
		return nil, errs[0]
	}

	body, hasBody := fields["body_base64"]
	claim, hasClaim := fields["claim"]
	hasBody = hasBody && !isNull(body)
	hasClaim = hasClaim && !isNull(claim)
	switch {
	case hasBody && hasClaim:
		return nil, &DecodeError{Code: CodeAmbiguousBody}
	case !hasBody && !hasClaim:
		return nil, &DecodeError{Code: CodeMissingBody}
	case hasClaim:
		m.Claim = str("claim", true)
		if len(errs) > 0 {
			return nil, errs[0]
		}
		tenant, _, err := ParseClaimRef(m.Claim)
		if err != nil {
			return nil, fieldErr("claim", errNotClaim)
		}
		if want := tenantOrDefault(m.TenantID); tenant != want {
			return nil, &DecodeError{Code: CodeTenantMismatch, Field: "claim"}
		}
		return m, nil
	}
	if len(body) < 2 || body[0] != '"' {
		return nil, fieldErr("body_base64", errNotStr)
	}
	enc := body[1 : len(body)-1]
	if bytes.IndexByte(enc, '\\') >= 0 { // an escaped "/" is still base64; unescape the rare document that has one
		s, err := unquote(body)
		if err != nil {
			return nil, fieldErr("body_base64", errNotStr)
		}
		enc = []byte(s)
	}
	dec := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	n, err := base64.StdEncoding.Strict().Decode(dec, enc)
	dec = dec[:n]
	if err != nil {
		return nil, &DecodeError{Code: CodeInvalidBodyBase64, Field: "body_base64", Err: err}
	}
	if err := check(m, dec); err != nil {
		return nil, err
	}
	m.body = dec
	return m, nil
}

// check compares body with the message's size and sha256.
func check(m *Message, body []byte) error {
	if int64(len(body)) != m.Size {
		return &DecodeError{Code: CodeSizeMismatch, Err: fmt.Errorf("body has %d bytes, size says %d", len(body), m.Size)}
	}
	sum := sha256.Sum256(body)
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	if string(hx[:]) != m.SHA256 {
		return &DecodeError{Code: CodeIntegrity, Err: errors.New("body does not match sha256")}
	}
	return nil
}

func tenantOrDefault(t string) string {
	if t == "" {
		return sinks.DefaultTenant
	}
	return t
}

// topLevel splits a valid JSON object into its members, refusing a repeated key.
func topLevel(b []byte) (map[string]json.RawMessage, error) {
	fields := make(map[string]json.RawMessage, 20)
	err := members(b, func(key string, value []byte) error {
		if _, dup := fields[key]; dup {
			return fieldErr(key, errDup)
		}
		fields[key] = value
		return nil
	})
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			return nil, de
		}
		return nil, &DecodeError{Code: CodeInvalidJSON, Err: err}
	}
	return fields, nil
}

// decodeHeaders reads the headers object in document order.
func decodeHeaders(raw json.RawMessage) ([]sinks.Header, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fieldErr("headers", errHeaders)
	}
	var hs []sinks.Header
	err := members(raw, func(name string, value []byte) error {
		if len(value) == 0 || value[0] != '"' {
			return fieldErr("headers", errHeaders)
		}
		v, err := unquote(value)
		if err != nil {
			return fieldErr("headers", errHeaders)
		}
		if seenBefore(hs, name) {
			return fieldErr("headers", errDup)
		}
		hs = append(hs, sinks.Header{Name: name, Value: v})
		return nil
	})
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			return nil, de
		}
		return nil, fieldErr("headers", errHeaders)
	}
	return hs, nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// parseUint accepts a JSON integer without sign, fraction or exponent.
func parseUint(raw json.RawMessage) (int64, error) {
	s := string(raw)
	if s == "" || s[0] == '-' || (len(s) > 1 && s[0] == '0') {
		return 0, errNotInt
	}
	return strconv.ParseInt(s, 10, 64)
}

func lowerHex64(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
