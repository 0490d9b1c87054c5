package verify

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"sync"
)

// maxPooledMessage bounds the signed-content buffers kept for reuse: a rare huge body should not pin its
// size in memory for the life of the process.
const maxPooledMessage = 1 << 20

// ed25519Verifier checks Standard Webhooks v1a signatures: tokens "v1a,<base64 sig>" in webhook-signature
// over "{webhook-id}.{webhook-timestamp}.{body}". It holds public keys only, no secret.
type ed25519Verifier struct {
	sc   *scheme
	keys []ed25519.PublicKey
	// bufs holds signed-content buffers: Ed25519 signs the whole message, so it must be contiguous.
	bufs sync.Pool
}

func buildEd25519(ps *problems, s Spec) Verifier {
	sc := compileScheme(ps, Spec{
		SignatureHeader: "webhook-signature", Parse: "space_versions", Version: "v1a",
		TimestampHeader: "webhook-timestamp", Signed: "{header:webhook-id}.{ts}.{body}",
		Encoding: "base64", ToleranceSeconds: s.ToleranceSeconds,
	}, ed25519.SignatureSize, false)

	checkList(ps, "public_key", s.PublicKey)
	keys := make([]ed25519.PublicKey, 0, len(s.PublicKey))
	for i, k := range s.PublicKey {
		if k == "" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(k, "whpk_"))
		if err != nil || len(raw) != ed25519.PublicKeySize {
			ps.addSecret(entryField("public_key", i, len(s.PublicKey)),
				"not the base64 of a 32-byte Ed25519 public key (optionally whpk_ prefixed)")
			continue
		}
		keys = append(keys, ed25519.PublicKey(raw))
	}
	return newEd25519Verifier(sc, keys)
}

func newEd25519Verifier(sc *scheme, keys []ed25519.PublicKey) *ed25519Verifier {
	if len(keys) > MaxSecrets {
		keys = keys[:MaxSecrets]
	}
	v := &ed25519Verifier{sc: sc, keys: keys}
	v.bufs.New = func() any { return new([]byte) }
	return v
}

func (v *ed25519Verifier) result(err error, hashed int64) Result {
	st := StatusOK
	if err != nil {
		st = StatusFailed
	}
	return Result{Status: st, Provider: "ed25519", Scheme: "v1a", Reason: err, HashedBytes: hashed}
}

// Verify checks the v1a tokens, in the order offered, against every public key, and stops after
// MaxSignatureChecks checks. Pure Ed25519 hashes R || A || message for every (signature, key) pair, so
// unlike an HMAC nothing can be hashed once and shared (Ed25519ph would allow it, but Standard Webhooks
// v1a is pure Ed25519); the cap is what bounds a forged request's cost.
func (v *ed25519Verifier) Verify(r *Request) Result {
	if len(v.keys) == 0 {
		return v.result(ErrBadSecret, 0)
	}
	var p prep
	if err := v.sc.prepare(r, &p); err != nil {
		return v.result(err, 0)
	}
	bp := v.bufs.Get().(*[]byte)
	msg := (*bp)[:0]
	if need := v.sc.signedLen(r, &p); cap(msg) < need {
		msg = make([]byte, 0, need)
	}
	msg = v.sc.appendSigned(msg, r, &p)
	matched, checks := false, 0
	for c := 0; c < p.n && !matched && checks < MaxSignatureChecks; c++ {
		for _, k := range v.keys {
			if checks == MaxSignatureChecks {
				break
			}
			checks++
			if ed25519.Verify(k, msg, p.sigs[c][:ed25519.SignatureSize]) {
				matched = true
				break
			}
		}
	}
	// Each check hashes R (32 bytes), A (32 bytes) and the message.
	hashed := int64(checks) * int64(len(msg)+64)
	if cap(msg) <= maxPooledMessage {
		*bp = msg
		v.bufs.Put(bp)
	}
	if !matched {
		return v.result(ErrNoMatch, hashed)
	}
	return v.result(nil, hashed)
}
