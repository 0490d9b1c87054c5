package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/ankusa-go/ankusa/config"
)

// principal is one configured caller, its token known only by its SHA-256, or its client certificate by the
// SHA-256 of its DER.
type principal struct {
	name       string
	hash       [sha256.Size]byte
	cert       bool // hash is the client certificate's fingerprint, not a token's hash
	scopes     []string
	allTenants bool
	tenants    []string
}

func (p *principal) has(scope string) bool { return slices.Contains(p.scopes, scope) }

// sees reports whether p may see or change tenant's objects.
func (p *principal) sees(tenant string) bool {
	return p.allTenants || slices.Contains(p.tenants, tenant)
}

// visible is the tenant filter of p's reads: nil for every tenant, else its tenants (empty, never nil, when it
// holds none).
func (p *principal) visible() []string {
	if p.allTenants {
		return nil
	}
	if p.tenants == nil {
		return []string{}
	}
	return p.tenants
}

// principals builds the callers of admin.principals, reading token_file tokens (the file is read once, at
// the listener's start; a missing or empty one fails the start).
func principals(cfg []config.Principal) ([]principal, error) {
	out := make([]principal, 0, len(cfg))
	for _, c := range cfg {
		p := principal{name: c.Name, scopes: slices.Clone(c.Scopes)}
		switch {
		case c.ClientCertSHA256 != "":
			h, err := hex.DecodeString(config.CertFingerprint(c.ClientCertSHA256))
			if err != nil || len(h) != sha256.Size {
				return nil, fmt.Errorf("admin: principal %s: client_cert_sha256 is not 64 hex digits", c.Name)
			}
			p.hash, p.cert = [sha256.Size]byte(h), true
		case c.TokenFile != "":
			b, err := os.ReadFile(c.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("admin: principal %s: cannot read its token_file: %w", c.Name, err)
			}
			tok := strings.TrimSpace(string(b))
			if tok == "" {
				return nil, fmt.Errorf("admin: principal %s: token_file %s is empty", c.Name, c.TokenFile)
			}
			p.hash = sha256.Sum256([]byte(tok))
		default:
			h, err := hex.DecodeString(c.TokenSHA256)
			if err != nil || len(h) != sha256.Size {
				// Validate refuses this; a Config built in code may not have been validated.
				return nil, fmt.Errorf("admin: principal %s: token_sha256 is not 64 hex digits", c.Name)
			}
			p.hash = [sha256.Size]byte(h)
		}
		for _, t := range c.Tenants {
			if t == "*" {
				p.allTenants = true
			} else {
				p.tenants = append(p.tenants, t)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// authenticate finds the principal of the request: the one whose client_cert_sha256 is the fingerprint of
// the verified client certificate the connection presented, else the one whose token the request bears. It
// compares hashes with every principal's in constant time and never stops early, so the answer's timing
// says nothing about which hash came close. p nil with present true: a certificate or token that matches
// no principal.
func authenticate(ps []principal, r *http.Request) (p *principal, present bool) {
	var certPresent bool
	// VerifiedChains is set only when the certificate chained to admin.tls.client_ca_file: an unverified
	// certificate never names a principal.
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		certPresent = true
		sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
		for i := range ps {
			if ps[i].cert && subtle.ConstantTimeCompare(sum[:], ps[i].hash[:]) == 1 {
				p = &ps[i]
			}
		}
		if p != nil {
			return p, true
		}
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, certPresent
	}
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return nil, h != ""
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return nil, true
	}
	sum := sha256.Sum256([]byte(tok))
	for i := range ps {
		if !ps[i].cert && subtle.ConstantTimeCompare(sum[:], ps[i].hash[:]) == 1 {
			p = &ps[i]
		}
	}
	return p, true
}

// guard wraps a /v1 handler: 401 (with WWW-Authenticate: Bearer) without a principal, 403 without scope;
// the handler checks the tenants it touches with principal.sees.
func guard(ps []principal, scopes []string, h func(http.ResponseWriter, *http.Request, *principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// An in-process caller (API.Serve) was authenticated when its session began; a request from the network
		// cannot carry this context value.
		p, present := r.Context().Value(callerKey{}).(*principal)
		if p == nil {
			p, present = authenticate(ps, r)
		}
		if p == nil {
			if present {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ankusa-admin", error="invalid_token"`)
			} else {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ankusa-admin"`)
			}
			writeError(w, http.StatusUnauthorized, codeUnauthorized, nil)
			return
		}
		if !slices.ContainsFunc(scopes, p.has) {
			writeError(w, http.StatusForbidden, codeForbidden, map[string]any{"scope": strings.Join(scopes, "|")})
			return
		}
		h(w, r, p)
	}
}
