package verify

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// maxBasicCredential bounds a decoded Basic credential ("user:password"); a longer one cannot match.
const maxBasicCredential = 512

type tokenLocation uint8

const (
	locBearer tokenLocation = iota
	locBasic
	locHeader
	locQuery
)

// tokenVerifier checks a static credential. It keeps SHA-256 digests of the accepted values, not the
// values, and compares digests in constant time: the comparison then leaks neither content nor length.
type tokenVerifier struct {
	provider string // "token", or the preset ("gitlab")
	loc      tokenLocation
	label    string
	name     string // header (lowercased) or query parameter name
	user     [sha256.Size]byte
	digests  [][sha256.Size]byte
}

func buildToken(ps *problems, s Spec) Verifier {
	v := &tokenVerifier{provider: "token", label: s.Location}
	switch s.Location {
	case "", "bearer":
		v.loc, v.label = locBearer, "bearer"
	case "basic":
		v.loc = locBasic
	case "header":
		v.loc = locHeader
	case "query":
		v.loc = locQuery
	default:
		ps.add("location", "unknown %q (bearer|basic|header|query)", s.Location)
	}
	switch v.loc {
	case locHeader:
		if s.Name == "" {
			ps.add("name", "required with location header")
		} else if !validHeaderName(s.Name) {
			ps.add("name", "%q is not a header name", s.Name)
		}
		v.name = strings.ToLower(s.Name)
	case locQuery:
		if s.Name == "" {
			ps.add("name", "required with location query")
		}
		v.name = s.Name
	default:
		if s.Name != "" {
			ps.add("name", "only with location header or query")
		}
	}
	if v.loc == locBasic {
		if s.Username == "" {
			ps.add("username", "required with location basic")
		} else if strings.ContainsRune(s.Username, ':') {
			ps.add("username", "must not contain ':'")
		}
		v.user = sha256.Sum256([]byte(s.Username))
	} else if s.Username != "" {
		ps.add("username", "only with location basic")
	}

	checkList(ps, "secret", s.Secret)
	for _, sec := range s.Secret {
		if sec != "" {
			v.digests = append(v.digests, sha256.Sum256([]byte(sec)))
		}
	}
	if len(v.digests) > MaxSecrets {
		v.digests = v.digests[:MaxSecrets]
	}
	return v
}

func (v *tokenVerifier) result(err error) Result {
	st := StatusOK
	if err != nil {
		st = StatusFailed
	}
	return Result{Status: st, Provider: v.provider, Scheme: v.label, Reason: err}
}

// Verify reads the credential at the configured location and compares it with every accepted value.
func (v *tokenVerifier) Verify(r *Request) Result {
	if len(v.digests) == 0 {
		return v.result(ErrBadSecret)
	}
	var cred []byte
	userOK := 1
	switch v.loc {
	case locBearer:
		cred = authParam(header(r, "authorization"), "bearer")
	case locBasic:
		enc := authParam(header(r, "authorization"), "basic")
		var buf [maxBasicCredential]byte
		if len(enc) == 0 || base64.StdEncoding.DecodedLen(len(enc)) > len(buf) {
			return v.result(ErrMissingCredential)
		}
		n, err := base64.StdEncoding.Decode(buf[:], enc)
		if err != nil {
			return v.result(ErrMissingCredential)
		}
		user, pass, ok := bytes.Cut(buf[:n], []byte{':'})
		if !ok {
			return v.result(ErrMissingCredential)
		}
		u := sha256.Sum256(user)
		userOK = subtle.ConstantTimeCompare(u[:], v.user[:])
		cred = pass
	case locHeader:
		cred = header(r, v.name)
	case locQuery:
		if r.Query != nil {
			cred = r.Query(v.name)
		}
	}
	if len(cred) == 0 {
		return v.result(ErrMissingCredential)
	}
	d := sha256.Sum256(cred)
	ok := 0
	for i := range v.digests {
		ok |= subtle.ConstantTimeCompare(d[:], v.digests[i][:])
	}
	if ok&userOK != 1 {
		return v.result(ErrNoMatch)
	}
	return v.result(nil)
}

// authParam returns the credential of an Authorization value whose scheme is want (RFC 9110: the scheme
// is case-insensitive, separated by one or more spaces), or nil.
func authParam(v []byte, want string) []byte {
	v = bytes.TrimSpace(v)
	if len(v) <= len(want) || !bytes.EqualFold(v[:len(want)], []byte(want)) || v[len(want)] != ' ' {
		return nil
	}
	return bytes.TrimLeft(v[len(want):], " ")
}
