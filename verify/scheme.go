package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// MaxCandidates bounds the signatures of this scheme one request may offer (stripe v1 pairs,
// space-separated tokens). Senders offer one per key they sign with, so a longer list is not a sender's:
// the header is malformed and refused before anything is hashed.
const MaxCandidates = 8

// maxSigBytes is the largest decoded signature: SHA-512 and Ed25519 are both 64 bytes. A candidate is
// decoded into sigBufBytes, since base64 decodes in 3-byte quanta (88 characters need 66 bytes of room).
const (
	maxSigBytes = 64
	sigBufBytes = maxSigBytes + 2
)

type parseKind uint8

const (
	parseWhole         parseKind = iota // the header value is the signature (after sig_prefix)
	parseCSVPairs                       // k=v,k=v: every sig_key pair is a candidate (stripe)
	parseSpaceVersions                  // space-separated "version,sig" tokens (standard webhooks)
)

type segKind uint8

const (
	segLiteral segKind = iota
	segBody
	segTS
	segHeader
)

// segment is one piece of a compiled `signed` template.
type segment struct {
	kind segKind
	lit  []byte // segLiteral
	hdr  int    // segHeader: index into scheme.headers
}

// scheme is the compiled, read-only description of a signed request: where the signature and timestamp
// are, which bytes are signed, how the signature is encoded.
type scheme struct {
	sigHeader string // lowercased
	parse     parseKind
	sigPrefix []byte
	sigKey    []byte
	pairSep   byte   // csv_pairs separator: ',' or ';' (paddle)
	version   []byte // "v1," for space_versions
	segs      []segment
	headers   []string // lowercased names of the {header:NAME} placeholders
	base64    bool
	sigLen    int // decoded signature length the scheme produces
	tsHeader  string
	tsField   []byte
	hasTS     bool
	tolerance int64
}

// prep is what one request yields before any key is used. It lives on the caller's stack.
type prep struct {
	n     int
	bad   bool // an offered signature of this scheme did not decode, or there were too many
	sigs  [MaxCandidates][sigBufBytes]byte
	ts    []byte
	hvals [maxSignedHeaders][]byte
}

// compileTemplate parses a `signed` template over {body}, {ts} and {header:NAME}.
func compileTemplate(ps *problems, tmpl string) (segs []segment, headers []string, usesTS bool) {
	rest := tmpl
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			segs = append(segs, segment{kind: segLiteral, lit: []byte(rest)})
			break
		}
		if open > 0 {
			segs = append(segs, segment{kind: segLiteral, lit: []byte(rest[:open])})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			ps.add("signed", "unterminated placeholder %q", rest[open:])
			return nil, nil, false
		}
		ph := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		switch {
		case ph == "body":
			segs = append(segs, segment{kind: segBody})
		case ph == "ts":
			segs = append(segs, segment{kind: segTS})
			usesTS = true
		case strings.HasPrefix(ph, "header:"):
			name := strings.ToLower(strings.TrimPrefix(ph, "header:"))
			if !validHeaderName(name) {
				ps.add("signed", "placeholder {%s} does not name a header", ph)
				return nil, nil, false
			}
			idx := -1
			for i, h := range headers {
				if h == name {
					idx = i
				}
			}
			if idx < 0 {
				if len(headers) == maxSignedHeaders {
					ps.add("signed", "at most %d distinct {header:NAME} placeholders", maxSignedHeaders)
					return nil, nil, false
				}
				idx = len(headers)
				headers = append(headers, name)
			}
			segs = append(segs, segment{kind: segHeader, hdr: idx})
		default:
			ps.add("signed", "unknown placeholder {%s} (want {body}, {ts} or {header:NAME})", ph)
			return nil, nil, false
		}
	}
	return segs, headers, usesTS
}

// validHeaderName accepts an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// prepare parses the signature header, decodes the candidates, checks the timestamp window and reads the
// signed headers. It returns the first reason the request cannot verify, in the order a sender would fix
// them: signature absent, signature malformed, timestamp, signed headers.
func (s *scheme) prepare(r *Request, p *prep) error {
	raw := header(r, s.sigHeader)
	if len(raw) == 0 {
		return ErrMissingSignature
	}
	var ts []byte
	switch s.parse {
	case parseWhole:
		v := bytes.TrimSpace(raw)
		if len(s.sigPrefix) > 0 {
			if !bytes.HasPrefix(v, s.sigPrefix) {
				return ErrMalformedSignature
			}
			v = v[len(s.sigPrefix):]
		}
		s.addCandidate(p, v)
	case parseCSVPairs:
		for rest := raw; len(rest) > 0; {
			var pair []byte
			pair, rest, _ = bytes.Cut(rest, []byte{s.pairSep})
			k, v, ok := bytes.Cut(bytes.TrimSpace(pair), []byte{'='})
			if !ok {
				continue
			}
			switch {
			case bytes.Equal(k, s.sigKey):
				s.addCandidate(p, v)
			case s.tsField != nil && ts == nil && bytes.Equal(k, s.tsField):
				ts = v
			}
		}
	case parseSpaceVersions:
		for rest := raw; len(rest) > 0; {
			var tok []byte
			tok, rest, _ = bytes.Cut(rest, []byte{' '})
			if bytes.HasPrefix(tok, s.version) {
				s.addCandidate(p, tok[len(s.version):])
			}
		}
	}
	// A malformed header is refused before any hashing: a signature of this scheme that does not decode
	// (or more than MaxCandidates of them) is no sender's, so a forger gets no hash out of it.
	if p.n == 0 || p.bad {
		return ErrMalformedSignature
	}

	if s.hasTS {
		if s.tsHeader != "" {
			ts = bytes.TrimSpace(header(r, s.tsHeader))
		}
		if len(ts) == 0 {
			return ErrMissingTimestamp
		}
		sec, ok := parseUnix(ts)
		if !ok {
			return ErrMalformedSignature
		}
		d := r.Now.Unix() - sec
		if d < 0 {
			d = -d
		}
		if d > s.tolerance {
			return ErrTimestampOutOfWindow
		}
		p.ts = ts
	}

	for i, name := range s.headers {
		v := header(r, name)
		if len(v) == 0 {
			return ErrMissingSignature
		}
		p.hvals[i] = v
	}
	return nil
}

// addCandidate decodes one offered signature into p. One that cannot be this scheme's signature (bad
// encoding, wrong length), or one past MaxCandidates, marks the header malformed.
func (s *scheme) addCandidate(p *prep, enc []byte) {
	if p.n == MaxCandidates {
		p.bad = true
		return
	}
	dst := p.sigs[p.n][:]
	if s.base64 {
		if base64.StdEncoding.DecodedLen(len(enc)) > len(dst) {
			p.bad = true
			return
		}
		n, err := base64.StdEncoding.Decode(dst, enc)
		if err != nil || n != s.sigLen {
			p.bad = true
			return
		}
	} else {
		if len(enc) != 2*s.sigLen {
			p.bad = true
			return
		}
		if _, err := hex.Decode(dst, enc); err != nil {
			p.bad = true
			return
		}
	}
	p.n++
}

// signedLen is the length of the signed content, for sizing a buffer.
func (s *scheme) signedLen(r *Request, p *prep) int {
	n := 0
	for _, sg := range s.segs {
		switch sg.kind {
		case segLiteral:
			n += len(sg.lit)
		case segBody:
			n += len(r.Body)
		case segTS:
			n += len(p.ts)
		case segHeader:
			n += len(p.hvals[sg.hdr])
		}
	}
	return n
}

// appendSigned appends the signed content to dst.
func (s *scheme) appendSigned(dst []byte, r *Request, p *prep) []byte {
	for _, sg := range s.segs {
		switch sg.kind {
		case segLiteral:
			dst = append(dst, sg.lit...)
		case segBody:
			dst = append(dst, r.Body...)
		case segTS:
			dst = append(dst, p.ts...)
		case segHeader:
			dst = append(dst, p.hvals[sg.hdr]...)
		}
	}
	return dst
}

// parseUnix reads integer unix seconds: 1 to 18 ASCII digits, so the value never overflows.
func parseUnix(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// compileScheme builds the scheme fields shared by the HMAC engine and Ed25519 from an inline spec.
// sigLen is the decoded signature length of the hash or signature algorithm.
func compileScheme(ps *problems, s Spec, sigLen int, weak bool) *scheme {
	sc := &scheme{sigLen: sigLen, pairSep: ','}
	if s.pairSep != 0 {
		sc.pairSep = s.pairSep
	}
	if s.SignatureHeader == "" {
		ps.add("signature_header", "required")
	} else if !validHeaderName(s.SignatureHeader) {
		ps.add("signature_header", "%q is not a header name", s.SignatureHeader)
	}
	sc.sigHeader = strings.ToLower(s.SignatureHeader)

	switch s.Parse {
	case "", "whole":
		sc.parse = parseWhole
	case "csv_pairs":
		sc.parse = parseCSVPairs
	case "space_versions":
		sc.parse = parseSpaceVersions
	default:
		ps.add("parse", "unknown %q (whole|csv_pairs|space_versions)", s.Parse)
	}
	if s.SigPrefix != "" {
		if sc.parse != parseWhole {
			ps.add("sig_prefix", "only with parse whole")
		}
		sc.sigPrefix = []byte(s.SigPrefix)
	}
	switch {
	case sc.parse == parseCSVPairs && s.SigKey == "":
		ps.add("sig_key", "required with parse csv_pairs")
	case sc.parse != parseCSVPairs && s.SigKey != "":
		ps.add("sig_key", "only with parse csv_pairs")
	}
	sc.sigKey = []byte(s.SigKey)
	// version is written "v1" (the Standard Webhooks spelling) or "v1,"; tokens read "v1,<sig>".
	version := strings.TrimSuffix(s.Version, ",")
	switch {
	case sc.parse == parseSpaceVersions && version == "":
		ps.add("version", "required with parse space_versions")
	case sc.parse != parseSpaceVersions && s.Version != "":
		ps.add("version", "only with parse space_versions")
	case strings.ContainsAny(version, " ,"):
		ps.add("version", "must not contain a space or a comma")
	}
	sc.version = []byte(version + ",")

	switch s.Encoding {
	case "", "hex":
	case "base64":
		sc.base64 = true
	default:
		ps.add("encoding", "unknown %q (hex|base64)", s.Encoding)
	}

	switch {
	case s.TimestampHeader != "" && s.TimestampField != "":
		ps.add("timestamp_field", "set timestamp_header or timestamp_field, not both")
	case s.TimestampHeader != "":
		if !validHeaderName(s.TimestampHeader) {
			ps.add("timestamp_header", "%q is not a header name", s.TimestampHeader)
		}
		sc.tsHeader = strings.ToLower(s.TimestampHeader)
		sc.hasTS = true
	case s.TimestampField != "":
		if sc.parse != parseCSVPairs {
			ps.add("timestamp_field", "only with parse csv_pairs")
		}
		sc.tsField = []byte(s.TimestampField)
		sc.hasTS = true
	}
	sc.tolerance = tolerance(s.ToleranceSeconds, weak)

	signed := s.Signed
	if signed == "" {
		signed = "{body}"
	}
	var usesTS bool
	sc.segs, sc.headers, usesTS = compileTemplate(ps, signed)
	if s.urlPrefix {
		// The URL is a literal, never parsed as a template: it may hold braces.
		sc.segs = append([]segment{{kind: segLiteral, lit: []byte(s.PublicURL)}}, sc.segs...)
	}
	switch {
	case usesTS && !sc.hasTS:
		ps.add("signed", "{ts} needs timestamp_header or timestamp_field")
	case sc.hasTS && !usesTS && len(sc.segs) > 0:
		// A timestamp the signature does not cover can be rewritten by whoever replays the request, so
		// it would bound nothing: refuse it rather than judge the replay window by it.
		field := "timestamp_header"
		if sc.tsField != nil {
			field = "timestamp_field"
		}
		ps.add(field, "the timestamp is not signed (signed has no {ts}), so it cannot bound replays; add {ts} to signed or remove %s", field)
	}
	return sc
}
