package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unsafe"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/store"
)

// hashedLen is the length of a hashed header value: "sha256:" and 64 hex digits.
const hashedLen = len("sha256:") + 2*sha256.Size

// HeaderPolicy is a source's store_headers policy, applied after verification and dedupe-key extraction
// (both read every header). What it removes is in no stored hook, archive segment, quarantine entry or
// sink message, because it runs before any of them is written.
type HeaderPolicy struct {
	hash bool
	// extra are the configured credential headers beyond the built-in ones, lowercased.
	extra []string
	// always are the token verifier's credential headers: dropped in every mode (design: "A token's
	// header is dropped from what is stored, whatever the store_headers policy").
	always []string
}

// NewHeaderPolicy builds the policy of spec; tokenHeaders are the headers the source's verifier reads a
// credential from (verify.Spec.CredentialHeaders), any case. An empty or unknown mode drops.
func NewHeaderPolicy(spec config.StoreHeaders, tokenHeaders []string) HeaderPolicy {
	p := HeaderPolicy{hash: spec.Mode == config.StoreHeadersHash}
	for _, h := range spec.Extra {
		p.extra = append(p.extra, strings.ToLower(h))
	}
	for _, h := range tokenHeaders {
		p.always = append(p.always, strings.ToLower(h))
	}
	return p
}

// builtinCredential is the one credential list the sinks' forward filter uses too (sinks.CredentialHeaders).
func builtinCredential(name string) bool { return sinks.IsCredentialHeader(name) }

func contains(list []string, name string) bool {
	for _, s := range list {
		if s == name {
			return true
		}
	}
	return false
}

// Apply filters hdrs in place and returns the kept prefix: a credential header is dropped (mode drop) or
// its value replaced by "sha256:<hex of the value>" (mode hash); a token verifier's header is always
// dropped. Names must already be lowercased (as the edge stores them). The hashed values are views into
// scratch, which is returned grown by them: it must outlive the headers, and is not reallocated while
// they are being written, so every view stays valid.
func (p HeaderPolicy) Apply(hdrs []store.Header, scratch []byte) ([]store.Header, []byte) {
	if p.hash {
		n := 0
		for _, h := range hdrs {
			if !contains(p.always, h.Name) && (builtinCredential(h.Name) || contains(p.extra, h.Name)) {
				n++
			}
		}
		if need := len(scratch) + n*hashedLen; need > cap(scratch) {
			scratch = append(make([]byte, 0, need), scratch...)
		}
	}
	kept := hdrs[:0]
	for _, h := range hdrs {
		switch {
		case contains(p.always, h.Name):
			continue
		case builtinCredential(h.Name) || contains(p.extra, h.Name):
			if !p.hash {
				continue
			}
			sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(h.Value), len(h.Value))) // read only: no copy
			start := len(scratch)
			scratch = append(scratch, "sha256:"...)
			scratch = hex.AppendEncode(scratch, sum[:])
			h.Value = view(scratch[start:])
		}
		kept = append(kept, h)
	}
	return kept, scratch
}
