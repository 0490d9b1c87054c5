package verify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"hash"
	"strings"
	"sync"
)

// The provider verifiers that the declarative HMAC engine cannot express (docs/providers.md): Linear's
// timestamp sits in the signed body, Mailgun's signature in the body, Twilio signs the URL and the sorted
// form parameters, SendGrid signs with ECDSA.

// linearToleranceSeconds is Linear's documented replay window ("within a minute").
const linearToleranceSeconds = 60

// rawKeys checks a rotation list and returns its entries as HMAC keys.
func rawKeys(ps *problems, list Secrets) [][]byte {
	checkList(ps, "secret", list)
	keys := make([][]byte, 0, len(list))
	for _, sec := range list {
		if sec != "" {
			keys = append(keys, []byte(sec))
		}
	}
	return keys
}

// matchParts keys every HMAC state over a || b and reports whether sig equals any sum, comparing every
// pair in constant time. It is the engine's loop for signed content that is not a header template.
func (v *hmacVerifier) matchParts(sig, a, b []byte) bool {
	st := v.states.Get().(*macState)
	matched := 0
	for i, h := range st.macs {
		h.Reset()
		h.Write(a)
		h.Write(b)
		sum := h.Sum(st.sums[i][:0])
		if hmac.Equal(sig, sum) {
			matched++
		}
	}
	v.states.Put(st)
	return matched > 0
}

// inWindow reports whether unix seconds sec are within tol seconds of r.Now.
func inWindow(r *Request, sec, tol int64) bool {
	d := r.Now.Unix() - sec
	if d < 0 {
		d = -d
	}
	return d <= tol
}

// linearVerifier is the linear preset: Linear-Signature, hex HMAC-SHA256 of the body, and the body's
// webhookTimestamp (unix milliseconds) within the window, checked before anything is hashed.
type linearVerifier struct {
	hmac      *hmacVerifier
	tolerance int64
}

func (v *linearVerifier) Verify(r *Request) Result {
	if v.hmac.keys == 0 || len(header(r, "linear-signature")) == 0 {
		return v.hmac.Verify(r) // ErrBadSecret, ErrMissingSignature
	}
	raw, ok := jsonField(r.Body, "webhookTimestamp")
	if !ok {
		return v.hmac.result(ErrMissingTimestamp, 0)
	}
	ms, ok := parseUnix(raw)
	if !ok {
		return v.hmac.result(ErrMalformedSignature, 0)
	}
	d := r.Now.UnixMilli() - ms
	if d < 0 {
		d = -d
	}
	if d > v.tolerance*1000 {
		return v.hmac.result(ErrTimestampOutOfWindow, 0)
	}
	return v.hmac.Verify(r)
}

// mailgunVerifier checks the signature object of a Mailgun JSON webhook body:
// {"signature":{"timestamp":"…","token":"…","signature":"<hex HMAC-SHA256 of timestamp+token>"}, …}.
type mailgunVerifier struct {
	h         *hmacVerifier
	tolerance int64
}

func buildMailgun(ps *problems, s Spec) Verifier {
	keys := rawKeys(ps, s.Secret)
	h := newHMACVerifier(nil, "mailgun", "mailgun", false, sha256.New, keys)
	return &mailgunVerifier{h: h, tolerance: tolerance(s.ToleranceSeconds, false)}
}

func (v *mailgunVerifier) Verify(r *Request) Result {
	if v.h.keys == 0 {
		return v.h.result(ErrBadSecret, 0)
	}
	obj, ok := jsonField(r.Body, "signature")
	if !ok {
		return v.h.result(ErrMissingSignature, 0)
	}
	field := func(k string) ([]byte, bool) {
		raw, ok := jsonField(obj, k)
		if !ok {
			return nil, false
		}
		return jsonStringValue(raw)
	}
	sigHex, ok := field("signature")
	if !ok || len(sigHex) == 0 {
		return v.h.result(ErrMissingSignature, 0)
	}
	var sig [sha256.Size]byte
	if len(sigHex) != 2*sha256.Size {
		return v.h.result(ErrMalformedSignature, 0)
	}
	if _, err := hex.Decode(sig[:], sigHex); err != nil {
		return v.h.result(ErrMalformedSignature, 0)
	}
	ts, ok := field("timestamp")
	if !ok || len(ts) == 0 {
		return v.h.result(ErrMissingTimestamp, 0)
	}
	sec, ok := parseUnix(ts)
	if !ok {
		return v.h.result(ErrMalformedSignature, 0)
	}
	if !inWindow(r, sec, v.tolerance) {
		return v.h.result(ErrTimestampOutOfWindow, 0)
	}
	token, ok := field("token")
	if !ok || len(token) == 0 {
		return v.h.result(ErrMissingSignature, 0)
	}
	hashed := int64(v.h.keys) * int64(len(ts)+len(token))
	if !v.h.matchParts(sig[:], ts, token) {
		return v.h.result(ErrNoMatch, hashed)
	}
	return v.h.result(nil, hashed)
}

// maxTwilioParams bounds the form parameters of a Twilio request; Twilio's own carry a few dozen.
const maxTwilioParams = 256

// twilioVerifier checks X-Twilio-Signature: base64 HMAC-SHA1, keyed with the auth token, of the URL
// Twilio requested (public_url plus the request's query string) followed by every POST parameter's name
// and value, sorted. A JSON body is signed through its hash instead: the URL then carries bodySHA256,
// the hex SHA-256 of the body, and the parameters are none.
type twilioVerifier struct {
	h   *hmacVerifier
	url []byte
	st  sync.Pool // *twilioState
}

// twilioState is one request's working set, reused.
type twilioState struct {
	decoded []byte      // the decoded names and values
	signed  []byte      // URL + sorted pairs
	pairs   [][2][]byte // views into decoded
}

func buildTwilio(ps *problems, s Spec) Verifier {
	checkPublicURL(ps, s.PublicURL, true)
	keys := rawKeys(ps, s.Secret)
	v := &twilioVerifier{h: newHMACVerifier(nil, "twilio", "twilio", true, sha1.New, keys), url: []byte(s.PublicURL)}
	v.st.New = func() any { return &twilioState{pairs: make([][2][]byte, 0, 32)} }
	return v
}

func (v *twilioVerifier) Verify(r *Request) Result {
	if v.h.keys == 0 {
		return v.h.result(ErrBadSecret, 0)
	}
	enc := bytes.TrimSpace(header(r, "x-twilio-signature"))
	if len(enc) == 0 {
		return v.h.result(ErrMissingSignature, 0)
	}
	var sig [sigBufBytes]byte
	if base64.StdEncoding.DecodedLen(len(enc)) > len(sig) {
		return v.h.result(ErrMalformedSignature, 0)
	}
	n, err := base64.StdEncoding.Decode(sig[:], enc)
	if err != nil || n != sha1.Size {
		return v.h.result(ErrMalformedSignature, 0)
	}
	st := v.st.Get().(*twilioState)
	defer v.putState(st)
	signed := append(st.signed[:0], v.url...)
	if len(r.RawQuery) > 0 {
		signed = append(append(signed, '?'), r.RawQuery...)
	}
	var hashed int64
	if want, ok := queryParam(r.RawQuery, "bodySHA256"); ok {
		// The JSON variant: the body is signed through its hash, which the URL carries.
		var got, wantSum [sha256.Size]byte
		got = sha256.Sum256(r.Body)
		hashed += int64(len(r.Body))
		if len(want) != 2*sha256.Size {
			st.signed = signed
			return v.h.result(ErrMalformedSignature, hashed)
		}
		if _, err := hex.Decode(wantSum[:], want); err != nil {
			st.signed = signed
			return v.h.result(ErrMalformedSignature, hashed)
		}
		if subtle.ConstantTimeCompare(got[:], wantSum[:]) != 1 {
			st.signed = signed
			return v.h.result(ErrNoMatch, hashed)
		}
	} else {
		var ok bool
		if signed, ok = st.appendSortedForm(signed, r.Body); !ok {
			// A body that is no form Twilio could have signed.
			st.signed = signed
			return v.h.result(ErrNoMatch, 0)
		}
	}
	st.signed = signed
	hashed += int64(v.h.keys) * int64(len(signed))
	if !v.h.matchParts(sig[:sha1.Size], signed, nil) {
		return v.h.result(ErrNoMatch, hashed)
	}
	return v.h.result(nil, hashed)
}

func (v *twilioVerifier) putState(st *twilioState) {
	if cap(st.decoded) > maxPooledMessage || cap(st.signed) > maxPooledMessage {
		return
	}
	clear(st.pairs[:cap(st.pairs)])
	st.pairs = st.pairs[:0]
	v.st.Put(st)
}

// appendSortedForm decodes an application/x-www-form-urlencoded body and appends its name+value pairs,
// sorted by name then value, to dst. It fails on a bad escape or more than maxTwilioParams pairs.
func (st *twilioState) appendSortedForm(dst, body []byte) ([]byte, bool) {
	if cap(st.decoded) < len(body) {
		st.decoded = make([]byte, 0, len(body))
	}
	dec := st.decoded[:0]
	pairs := st.pairs[:0]
	for rest := body; len(rest) > 0; {
		var kv []byte
		kv, rest, _ = bytes.Cut(rest, []byte{'&'})
		if len(kv) == 0 {
			continue
		}
		if len(pairs) == maxTwilioParams {
			return dst, false
		}
		k, val, _ := bytes.Cut(kv, []byte{'='})
		var ok bool
		start := len(dec)
		if dec, ok = appendUnescaped(dec, k); !ok {
			return dst, false
		}
		mid := len(dec)
		if dec, ok = appendUnescaped(dec, val); !ok {
			return dst, false
		}
		pairs = append(pairs, [2][]byte{dec[start:mid:mid], dec[mid:len(dec):len(dec)]})
	}
	// Insertion sort: no allocation, and n is bounded by maxTwilioParams.
	for i := 1; i < len(pairs); i++ {
		for j := i; j > 0 && pairLess(pairs[j], pairs[j-1]); j-- {
			pairs[j], pairs[j-1] = pairs[j-1], pairs[j]
		}
	}
	for _, p := range pairs {
		dst = append(append(dst, p[0]...), p[1]...)
	}
	st.decoded, st.pairs = dec, pairs
	return dst, true
}

func pairLess(a, b [2][]byte) bool {
	if c := bytes.Compare(a[0], b[0]); c != 0 {
		return c < 0
	}
	return bytes.Compare(a[1], b[1]) < 0
}

// appendUnescaped appends the form-decoded s ('+' is a space, %XX a byte) to dst. dst has room: decoding
// never lengthens.
func appendUnescaped(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			dst = append(dst, ' ')
		case '%':
			if i+2 >= len(s) {
				return dst, false
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return dst, false
			}
			dst = append(dst, hi<<4|lo)
			i += 2
		default:
			dst = append(dst, c)
		}
	}
	return dst, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// queryParam returns the raw value of the first parameter name of a query string.
func queryParam(q []byte, name string) ([]byte, bool) {
	for rest := q; len(rest) > 0; {
		var kv []byte
		kv, rest, _ = bytes.Cut(rest, []byte{'&'})
		k, v, _ := bytes.Cut(kv, []byte{'='})
		if string(k) == name {
			return v, true
		}
	}
	return nil, false
}

// ecdsaCheckBytes is what one ECDSA P-256 verification is charged to the verification budget, in bytes
// of SHA-256 input of about the same CPU time (a verification is ~100 µs, hashing runs at ~1-2 GB/s).
const ecdsaCheckBytes = 128 << 10

// maxECDSASig bounds a DER ECDSA P-256 signature (72 bytes at most) with room to spare.
const maxECDSASig = 96

// sendgridVerifier checks the SendGrid Event Webhook: an ECDSA P-256 signature (base64 of ASN.1 DER) in
// X-Twilio-Email-Event-Webhook-Signature over SHA-256 of timestamp + body, the timestamp in
// X-Twilio-Email-Event-Webhook-Timestamp. It holds public keys only.
type sendgridVerifier struct {
	keys      []*ecdsa.PublicKey
	tolerance int64
	hashes    sync.Pool // hash.Hash (SHA-256)
}

func buildSendGrid(ps *problems, s Spec) Verifier {
	checkList(ps, "public_key", s.PublicKey)
	v := &sendgridVerifier{tolerance: tolerance(s.ToleranceSeconds, false)}
	v.hashes.New = func() any { return sha256.New() }
	for i, k := range s.PublicKey {
		if k == "" {
			continue
		}
		pub, ok := parseECDSAKey(k)
		if !ok {
			ps.addSecret(entryField("public_key", i, len(s.PublicKey)),
				"not an ECDSA P-256 public key (the base64 of its DER SubjectPublicKeyInfo, or PEM)")
			continue
		}
		v.keys = append(v.keys, pub)
	}
	if len(v.keys) > MaxSecrets {
		v.keys = v.keys[:MaxSecrets]
	}
	return v
}

func parseECDSAKey(k string) (*ecdsa.PublicKey, bool) {
	var der []byte
	if strings.Contains(k, "-----BEGIN") {
		b, _ := pem.Decode([]byte(k))
		if b == nil {
			return nil, false
		}
		der = b.Bytes
	} else {
		var err error
		if der, err = base64.StdEncoding.DecodeString(strings.TrimSpace(k)); err != nil {
			return nil, false
		}
	}
	pk, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, false
	}
	pub, ok := pk.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, false
	}
	return pub, true
}

func (v *sendgridVerifier) result(err error, hashed int64) Result {
	st := StatusOK
	if err != nil {
		st = StatusFailed
	}
	return Result{Status: st, Provider: "sendgrid", Scheme: "ecdsa-p256", Reason: err, HashedBytes: hashed}
}

func (v *sendgridVerifier) Verify(r *Request) Result {
	if len(v.keys) == 0 {
		return v.result(ErrBadSecret, 0)
	}
	enc := bytes.TrimSpace(header(r, "x-twilio-email-event-webhook-signature"))
	if len(enc) == 0 {
		return v.result(ErrMissingSignature, 0)
	}
	var sig [maxECDSASig]byte
	if base64.StdEncoding.DecodedLen(len(enc)) > len(sig) {
		return v.result(ErrMalformedSignature, 0)
	}
	n, err := base64.StdEncoding.Decode(sig[:], enc)
	if err != nil || n < 8 {
		return v.result(ErrMalformedSignature, 0)
	}
	ts := bytes.TrimSpace(header(r, "x-twilio-email-event-webhook-timestamp"))
	if len(ts) == 0 {
		return v.result(ErrMissingTimestamp, 0)
	}
	sec, ok := parseUnix(ts)
	if !ok {
		return v.result(ErrMalformedSignature, 0)
	}
	if !inWindow(r, sec, v.tolerance) {
		return v.result(ErrTimestampOutOfWindow, 0)
	}
	h := v.hashes.Get().(hash.Hash)
	h.Reset()
	h.Write(ts)
	h.Write(r.Body)
	var digest [sha256.Size]byte
	h.Sum(digest[:0])
	v.hashes.Put(h)
	matched, checks := false, 0
	for _, k := range v.keys {
		checks++
		if ecdsa.VerifyASN1(k, digest[:], sig[:n]) {
			matched = true
			break
		}
	}
	hashed := int64(len(ts)+len(r.Body)) + int64(checks)*ecdsaCheckBytes
	if !matched {
		return v.result(ErrNoMatch, hashed)
	}
	return v.result(nil, hashed)
}
