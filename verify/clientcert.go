package verify

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// certPin is one pinned digest: of the whole DER certificate, or of its SubjectPublicKeyInfo (which
// survives a re-issued certificate with the same key).
type certPin struct {
	spki bool
	sum  [sha256.Size]byte
}

// clientCertVerifier accepts a request whose mTLS client certificate matches a pin. Chain validation is
// the listener's (its tls.Config); the pin narrows a valid chain to the certificates this source trusts.
type clientCertVerifier struct {
	pins            []certPin
	wantDER, wantPK bool
}

func buildClientCert(ps *problems, s Spec) Verifier {
	v := &clientCertVerifier{}
	if len(s.Pins) == 0 {
		ps.add("pins", "required")
	}
	for i, p := range s.Pins {
		field := fmt.Sprintf("pins[%d]", i)
		var pin certPin
		var hexSum string
		switch {
		case strings.HasPrefix(p, "sha256:"):
			hexSum = p[len("sha256:"):]
		case strings.HasPrefix(p, "spki-sha256:"):
			hexSum, pin.spki = p[len("spki-sha256:"):], true
		default:
			ps.add(field, "must be sha256:<hex> or spki-sha256:<hex>")
			continue
		}
		// The length is checked first: hex.Decode writes past a short destination.
		if len(hexSum) != 2*sha256.Size {
			ps.add(field, "want 64 hex digits after the prefix")
			continue
		}
		if _, err := hex.Decode(pin.sum[:], []byte(hexSum)); err != nil {
			ps.add(field, "want 64 hex digits after the prefix")
			continue
		}
		v.pins = append(v.pins, pin)
		v.wantPK = v.wantPK || pin.spki
		v.wantDER = v.wantDER || !pin.spki
	}
	return v
}

func (v *clientCertVerifier) result(err error) Result {
	st := StatusOK
	if err != nil {
		st = StatusFailed
	}
	return Result{Status: st, Provider: "client_cert", Scheme: "pin", Reason: err}
}

// Verify matches the peer certificate against every pin, of either kind.
func (v *clientCertVerifier) Verify(r *Request) Result {
	if len(v.pins) == 0 {
		return v.result(ErrBadSecret)
	}
	c := r.PeerCert
	if c == nil {
		return v.result(ErrNoCertificate)
	}
	var der, pk [sha256.Size]byte
	if v.wantDER {
		der = sha256.Sum256(c.Raw)
	}
	if v.wantPK {
		pk = sha256.Sum256(c.RawSubjectPublicKeyInfo)
	}
	ok := 0
	for i := range v.pins {
		got := &der
		if v.pins[i].spki {
			got = &pk
		}
		ok |= subtle.ConstantTimeCompare(got[:], v.pins[i].sum[:])
	}
	if ok != 1 {
		return v.result(ErrCertificateMismatch)
	}
	return v.result(nil)
}
