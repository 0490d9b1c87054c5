package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"strings"
	"sync"
)

// hmacVerifier is the one HMAC engine behind the presets and inline schemes.
type hmacVerifier struct {
	sc       *scheme
	provider string
	label    string // Result.Scheme
	weak     bool
	keys     int // usable keys; 0 fails every request closed
	// states holds per-goroutine HMAC states, one per key, keyed once: an HMAC cannot be shared between
	// concurrent requests, and keying one per request would allocate on every hook.
	states sync.Pool
}

// macState is one request's working set: a keyed HMAC per secret and room for their sums.
type macState struct {
	macs []hash.Hash
	sums [MaxSecrets][maxSigBytes]byte
}

func buildHMAC(ps *problems, provider string, s Spec) Verifier {
	var newHash func() hash.Hash
	weak := false
	switch s.Hash {
	case "", "sha256":
		newHash = sha256.New
	case "sha512":
		newHash = sha512.New
	case "sha1":
		newHash, weak = sha1.New, true
	default:
		ps.add("hash", "unknown %q (sha256|sha512|sha1)", s.Hash)
		newHash = sha256.New
	}
	sc := compileScheme(ps, s, newHash().Size(), weak)

	checkList(ps, "secret", s.Secret)
	keys := make([][]byte, 0, len(s.Secret))
	switch s.SecretDecode {
	case "", "raw":
		for _, sec := range s.Secret {
			if sec != "" {
				keys = append(keys, []byte(sec))
			}
		}
	case "whsec_base64":
		for i, sec := range s.Secret {
			if sec == "" {
				continue
			}
			k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sec, "whsec_"))
			if err != nil || len(k) == 0 {
				ps.addSecret(entryField("secret", i, len(s.Secret)), "not base64 after the whsec_ prefix")
				continue
			}
			keys = append(keys, k)
		}
	default:
		ps.add("secret_decode", "unknown %q (raw|whsec_base64)", s.SecretDecode)
	}

	label := provider
	if provider == "hmac" {
		h := s.Hash
		if h == "" {
			h = "sha256"
		}
		label = "hmac-" + h
	}
	return newHMACVerifier(sc, provider, label, weak, newHash, keys)
}

func newHMACVerifier(sc *scheme, provider, label string, weak bool, newHash func() hash.Hash, keys [][]byte) *hmacVerifier {
	if len(keys) > MaxSecrets {
		keys = keys[:MaxSecrets]
	}
	v := &hmacVerifier{sc: sc, provider: provider, label: label, weak: weak, keys: len(keys)}
	v.states.New = func() any {
		st := &macState{macs: make([]hash.Hash, len(keys))}
		for i, k := range keys {
			st.macs[i] = hmac.New(newHash, k)
		}
		return st
	}
	return v
}

func (v *hmacVerifier) result(err error, hashed int64) Result {
	st := StatusOK
	if err != nil {
		st = StatusFailed
	}
	return Result{Status: st, Provider: v.provider, Scheme: v.label, Reason: err, HashedBytes: hashed, WeakHash: v.weak}
}

// Verify checks the request's signatures against every key; any (candidate, key) pair may match. The
// signed content is hashed once per key, whatever the number of candidates: an HMAC is keyed, so no work
// is shared between keys, but every candidate is compared with the same sums.
func (v *hmacVerifier) Verify(r *Request) Result {
	if v.keys == 0 {
		return v.result(ErrBadSecret, 0)
	}
	var p prep
	if err := v.sc.prepare(r, &p); err != nil {
		return v.result(err, 0)
	}
	hashed := int64(v.keys) * int64(v.sc.signedLen(r, &p))
	st := v.states.Get().(*macState)
	for i, h := range st.macs {
		h.Reset()
		for _, sg := range v.sc.segs {
			switch sg.kind {
			case segLiteral:
				h.Write(sg.lit)
			case segBody:
				h.Write(r.Body)
			case segTS:
				h.Write(p.ts)
			case segHeader:
				h.Write(p.hvals[sg.hdr])
			}
		}
		h.Sum(st.sums[i][:0])
	}
	matched := 0
	n := v.sc.sigLen
	for c := 0; c < p.n; c++ {
		for i := range st.macs {
			// hmac.Equal is constant-time; every pair is compared, so timing does not say which matched.
			if hmac.Equal(p.sigs[c][:n], st.sums[i][:n]) {
				matched++
			}
		}
	}
	v.states.Put(st)
	if matched == 0 {
		return v.result(ErrNoMatch, hashed)
	}
	return v.result(nil, hashed)
}
