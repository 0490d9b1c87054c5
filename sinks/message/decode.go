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
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
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
	var enc string
	if err := json.Unmarshal(body, &enc); err != nil {
		return nil, fieldErr("body_base64", errNotStr)
	}
	dec, err := base64.StdEncoding.Strict().DecodeString(enc)
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
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, &DecodeError{Code: CodeInvalidJSON, Err: err}
	}
	fields := make(map[string]json.RawMessage, 20)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &DecodeError{Code: CodeInvalidJSON, Err: err}
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, &DecodeError{Code: CodeInvalidJSON, Err: err}
		}
		if _, dup := fields[key]; dup {
			return nil, fieldErr(key, errDup)
		}
		fields[key] = raw
	}
	return fields, nil
}

// decodeHeaders reads the headers object in document order.
func decodeHeaders(raw json.RawMessage) ([]sinks.Header, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fieldErr("headers", errHeaders)
	}
	var hs []sinks.Header
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fieldErr("headers", errHeaders)
		}
		name, _ := tok.(string)
		tok, err = dec.Token()
		value, isString := tok.(string)
		if err != nil || !isString {
			return nil, fieldErr("headers", errHeaders)
		}
		if seenBefore(hs, name) {
			return nil, fieldErr("headers", errDup)
		}
		hs = append(hs, sinks.Header{Name: name, Value: value})
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
