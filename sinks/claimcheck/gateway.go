package claimcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/storage/blob"
)

// SHA256Header carries the claimed body's SHA-256 (lowercase hex) recorded at check-in. The gateway does not
// recompute it: the redeemer checks the body against the digest its message carries (inventory A.7).
const SHA256Header = "X-Ankusa-Sha256"

// Auth checks bearer tokens against claim_check.auth. Tokens are kept as SHA-256 digests: a lookup compares
// digests, so neither timing nor a memory dump of the map gives a token away.
type Auth struct {
	grants map[[32]byte]grant
}

type grant struct {
	read       bool
	anyTenant  bool
	tenants    map[string]bool
	tokenIndex int
}

// NewAuth builds the token table of claim_check.auth (config.Validate checked its shape).
func NewAuth(c config.ClaimAuth) *Auth {
	a := &Auth{grants: make(map[[32]byte]grant, len(c.Tokens))}
	for i, tk := range c.Tokens {
		g := grant{tenants: map[string]bool{}, tokenIndex: i}
		for _, s := range tk.Scopes {
			g.read = g.read || s == config.ScopeClaimsRead
		}
		for _, t := range tk.Tenants {
			if t == "*" {
				g.anyTenant = true
			}
			g.tenants[t] = true
		}
		a.grants[sha256.Sum256([]byte(tk.Token))] = g
	}
	return a
}

// check returns 0 when the request's bearer token may read tenant's claims, else 401 (no or unknown token)
// or 403 (a known token without the scope or the tenant).
func (a *Auth) check(r *http.Request, tenant string) (status, tokenIndex int) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return http.StatusUnauthorized, -1
	}
	g, ok := a.grants[sha256.Sum256([]byte(tok))]
	if !ok {
		return http.StatusUnauthorized, -1
	}
	if !g.read || !(g.anyTenant || g.tenants[tenant]) {
		return http.StatusForbidden, g.tokenIndex
	}
	return 0, g.tokenIndex
}

// Results of a gateway read, as GatewayHooks.Redeemed reports them (ankusa_claim_check_redeems_total{result}).
const (
	ResultOK           = "ok"
	ResultNotFound     = "not_found"
	ResultInvalid      = "invalid"
	ResultUnauthorized = "unauthorized"
	ResultForbidden    = "forbidden"
	ResultStoreError   = "store_error"
)

// GatewayHooks let the embedding process observe the gateway (metrics) without the gateway knowing of them.
type GatewayHooks struct {
	// Redeemed is called once per claim request with its Result* value.
	Redeemed func(result string)
}

// Gateway is the read-only claim gateway: GET and HEAD /v1/claims/{tenant}/{claim_id}, and /health.
type Gateway struct {
	reader *Reader
	auth   *Auth
	log    zerolog.Logger
	hooks  GatewayHooks
	mux    *http.ServeMux
}

// NewGateway serves claims read by reader to requests auth admits.
func NewGateway(reader *Reader, auth *Auth, log zerolog.Logger, hooks GatewayHooks) *Gateway {
	if hooks.Redeemed == nil {
		hooks.Redeemed = func(string) {}
	}
	g := &Gateway{reader: reader, auth: auth, log: log, hooks: hooks, mux: http.NewServeMux()}
	g.mux.HandleFunc("GET /v1/claims/{tenant}/{id}", g.claim) // GET patterns match HEAD too
	g.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { writeErr(w, http.StatusNotFound, "not_found") })
	g.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	return g
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A path the mux would clean and redirect (/v1/claims/a/../b) is refused, not followed.
	if r.URL.RawPath != "" || strings.Contains(r.URL.Path, "//") || strings.Contains(r.URL.Path, "/.") {
		writeErr(w, http.StatusBadRequest, "invalid_claim")
		return
	}
	g.mux.ServeHTTP(w, r)
}

func (g *Gateway) claim(w http.ResponseWriter, r *http.Request) {
	tenant, id := r.PathValue("tenant"), r.PathValue("id")
	status, tokenIndex := g.auth.check(r, tenant)
	switch status {
	case http.StatusUnauthorized:
		g.hooks.Redeemed(ResultUnauthorized)
		w.Header().Set("WWW-Authenticate", `Bearer realm="claims"`)
		writeErr(w, status, "unauthorized")
		return
	case http.StatusForbidden:
		g.hooks.Redeemed(ResultForbidden)
		writeErr(w, status, "forbidden")
		return
	}
	var (
		info Info
		body []byte
		err  error
	)
	if r.Method == http.MethodHead {
		info, err = g.reader.Stat(r.Context(), tenant, id)
	} else {
		info, body, err = g.reader.Fetch(r.Context(), tenant, id)
	}
	if err != nil {
		g.fail(w, r, tenant, id, tokenIndex, err)
		return
	}
	g.hooks.Redeemed(ResultOK)
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("Cache-Control", "private, max-age=31536000, immutable")
	hd.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	hd.Set(SHA256Header, hex.EncodeToString(info.SHA256[:]))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// fail answers a failed lookup. Tenant and id are only logged once valid (invariant 3).
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, tenant, id string, tokenIndex int, err error) {
	switch {
	case errors.Is(err, ErrInvalidClaim):
		g.hooks.Redeemed(ResultInvalid)
		writeErr(w, http.StatusBadRequest, "invalid_claim")
		return
	case errors.Is(err, ErrNotFound):
		g.hooks.Redeemed(ResultNotFound)
		writeErr(w, http.StatusNotFound, "not_found")
		return
	}
	g.hooks.Redeemed(ResultStoreError)
	code, retry := "store_unavailable", "1"
	switch {
	case errors.Is(err, blob.ErrForbidden):
		code, retry = "store_forbidden", "60"
	case errors.Is(err, ErrCorruptPack):
		code, retry = "corrupt_pack", "60"
	}
	g.log.Warn().Err(err).Str("tenant", tenant).Str("claim_id", id).Int("token", tokenIndex).
		Str("method", r.Method).Str("code", code).Msg("claim read failed")
	w.Header().Set("Retry-After", retry)
	writeErr(w, http.StatusServiceUnavailable, code)
}

func writeErr(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"error":"` + code + `"}`))
}
