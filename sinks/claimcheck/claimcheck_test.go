package claimcheck

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/storage/blob/blobtest"
	"github.com/ankusa-go/ankusa/test/fixture/s3fake"
)

const (
	tokenAcme = "acme-reader-0123456789"
	tokenAll  = "all-tenants-0123456789"
	tenant    = "acme"
)

var testAuth = config.ClaimAuth{Tokens: []config.ClaimToken{
	{Token: tokenAcme, Scopes: []string{config.ScopeClaimsRead}, Tenants: []string{tenant}},
	{Token: tokenAll, Scopes: []string{config.ScopeClaimsRead}, Tenants: []string{"*"}},
}}

func localStore(t *testing.T) *blob.LocalFS {
	t.Helper()
	s, err := blob.NewLocalFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// gateway serves store on a loopback port and returns its base URL.
func gateway(t *testing.T, store blob.Store) string {
	t.Helper()
	srv := httptest.NewServer(NewGateway(NewReader(store), NewAuth(testAuth), zerolog.Nop(), GatewayHooks{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func get(t *testing.T, method, url, token string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestRoundTripThroughPackAndGateway: bodies checked in come back byte-exact through the gateway and
// message.Redeem (which checks size and sha256), from a local store and from S3, across several packs.
func TestRoundTripThroughPackAndGateway(t *testing.T) {
	srv := s3fake.Start(t)
	for name, store := range map[string]blob.Store{
		"local": localStore(t),
		"s3":    mustOpen(t, srv.BlobStore("")),
	} {
		t.Run(name, func(t *testing.T) {
			bodies := [][]byte{random(t, 70_000), {}, random(t, 1), random(t, 2<<20), random(t, 300), []byte("x")}
			c := NewChecker(store, Options{PackMaxBytes: 100_000})
			claims, err := c.CheckIn(context.Background(), tenant, bodies)
			if err != nil {
				t.Fatal(err)
			}
			if len(claims) != len(bodies) {
				t.Fatalf("%d claims for %d bodies", len(claims), len(bodies))
			}
			packs := map[ClaimID]int{}
			for _, cl := range claims {
				packs[cl.ID.Pack()]++
			}
			// 70_000+0+1 | 2 MiB alone | 300+1: split at 100_000 bytes, a bigger body alone.
			if len(packs) != 3 {
				t.Fatalf("%d packs, want 3 (split at pack_max_bytes, the 2 MiB body alone)", len(packs))
			}
			if got := blobtest.Keys(t, store, "claims/tenant="+tenant+"/"); len(got) != 3 {
				t.Fatalf("pack objects = %v, want 3", got)
			}
			base := gateway(t, store)
			for i, cl := range claims {
				env := &sinks.Envelope{IDText: "0190e1f0-0000-7000-8000-000000000001", Source: "s", Tenant: tenant, Body: bodies[i], Claim: cl.Ref}
				m, err := message.Decode(message.Encode(nil, env, message.Meta{}))
				if err != nil {
					t.Fatal(err)
				}
				if m.SHA256 != cl.SHA256 || m.Size != cl.Size {
					t.Fatalf("claim %d: message says %d bytes %s, check-in recorded %d %s", i, m.Size, m.SHA256, cl.Size, cl.SHA256)
				}
				got, err := message.Redeem(context.Background(), nil, base, tokenAcme, m)
				if err != nil {
					t.Fatalf("Redeem claim %d (%d bytes): %v", i, len(bodies[i]), err)
				}
				if !bytes.Equal(got, bodies[i]) {
					t.Fatalf("claim %d: redeemed %d bytes differ from the %d checked in", i, len(got), len(bodies[i]))
				}
			}
			// The answer's headers, and HEAD.
			cl := claims[0]
			resp, body := get(t, http.MethodGet, base+"/v1/claims/"+tenant+"/"+cl.ID.String(), tokenAcme)
			if resp.StatusCode != 200 || !bytes.Equal(body, bodies[0]) {
				t.Fatalf("GET = %d, %d bytes", resp.StatusCode, len(body))
			}
			for k, want := range map[string]string{
				"Content-Type":  "application/octet-stream",
				"Cache-Control": "private, max-age=31536000, immutable",
				SHA256Header:    cl.SHA256,
			} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			resp, body = get(t, http.MethodHead, base+"/v1/claims/"+tenant+"/"+cl.ID.String(), tokenAcme)
			if resp.StatusCode != 200 || len(body) != 0 || resp.ContentLength != 70_000 || resp.Header.Get(SHA256Header) != cl.SHA256 {
				t.Fatalf("HEAD = %d, body %d bytes, length %d, sha %q", resp.StatusCode, len(body), resp.ContentLength, resp.Header.Get(SHA256Header))
			}
		})
	}
}

func mustOpen(t *testing.T, c config.BlobStore) blob.Store {
	t.Helper()
	s, err := blob.Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPackIsAZip: a pack is a standard ZIP (any unzip reads it; CRCs hold) with the index first, one entry per
// claim and a manifest (inventory D.5).
func TestPackIsAZip(t *testing.T) {
	store := localStore(t)
	bodies := [][]byte{[]byte("first"), {}, random(t, 5000)}
	claims, err := NewChecker(store, Options{}).CheckIn(context.Background(), tenant, bodies)
	if err != nil {
		t.Fatal(err)
	}
	pack := blobtest.MustGet(t, store, PackKey(tenant, claims[0].ID))
	zr, err := zip.NewReader(bytes.NewReader(pack), int64(len(pack)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc) // checks the CRC at EOF
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if i := slices.Index([]string{"claims/00000", "claims/00001", "claims/00002"}, f.Name); i >= 0 && !bytes.Equal(b, bodies[i]) {
			t.Fatalf("%s holds other bytes", f.Name)
		}
		if f.Name == "manifest.json" && !strings.Contains(string(b), `"pack_id":"`+claims[0].ID.Pack().String()+`"`) {
			t.Fatalf("manifest: %s", b)
		}
	}
	if want := []string{"index", "claims/00000", "claims/00001", "claims/00002", "manifest.json"}; !slices.Equal(names, want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	// Claim ids: one pack, positions 0..2, pack id = position zeroed, keyed by the pack's UTC day.
	for i, cl := range claims {
		if cl.ID.Position() != i || cl.ID.Pack() != claims[0].ID || cl.Ref != "urn:ankusa:claim:v1:acme:"+cl.ID.String() {
			t.Fatalf("claim %d: id %s position %d ref %s", i, cl.ID, cl.ID.Position(), cl.Ref)
		}
	}
	if !strings.HasPrefix(PackKey(tenant, claims[0].ID), "claims/tenant=acme/dt="+time.Now().UTC().Format(time.DateOnly)+"/") {
		t.Fatalf("pack key %s", PackKey(tenant, claims[0].ID))
	}
}

// TestGatewayAuth: no token or an unknown one is 401; a token for another tenant is 403 (claim_check.auth:
// claims:read plus the claim's tenant); a wildcard token reads every tenant.
func TestGatewayAuth(t *testing.T) {
	store := localStore(t)
	c := NewChecker(store, Options{})
	other, err := c.CheckIn(context.Background(), "globex", [][]byte{[]byte("globex body")})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := c.CheckIn(context.Background(), tenant, [][]byte{[]byte("acme body")})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]int{}
	var mu sync.Mutex
	srv := httptest.NewServer(NewGateway(NewReader(store), NewAuth(testAuth), zerolog.Nop(), GatewayHooks{Redeemed: func(r string) {
		mu.Lock()
		results[r]++
		mu.Unlock()
	}}))
	defer srv.Close()
	base := srv.URL
	f := func(path, token string, want int) {
		t.Helper()
		resp, body := get(t, http.MethodGet, base+path, token)
		if resp.StatusCode != want {
			t.Fatalf("GET %s with %q = %d %s, want %d", path, token, resp.StatusCode, body, want)
		}
		if want != 200 && (bytes.Contains(body, []byte("body")) || resp.Header.Get(SHA256Header) != "") {
			t.Fatalf("refusal leaked the claim: %s", body)
		}
		if want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatal("401 without WWW-Authenticate")
		}
	}
	otherPath := "/v1/claims/globex/" + other[0].ID.String()
	minePath := "/v1/claims/acme/" + mine[0].ID.String()
	f(minePath, "", 401)
	f(minePath, "not-a-known-token-000", 401)
	f(otherPath, tokenAcme, 403)
	f(minePath, tokenAcme, 200)
	f(otherPath, tokenAll, 200)
	// The scheme is "Bearer", case-insensitive; anything else is no token.
	for _, h := range []string{"Basic " + tokenAcme, tokenAcme, "Bearer", "Bearer  " + tokenAcme} {
		req, _ := http.NewRequest(http.MethodGet, base+minePath, nil)
		req.Header.Set("Authorization", h)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("Authorization %q = %d, want 401", h, resp.StatusCode)
		}
	}
	mu.Lock()
	if want := map[string]int{ResultOK: 2, ResultUnauthorized: 6, ResultForbidden: 1}; !maps.Equal(results, want) {
		t.Errorf("Redeemed hook saw %v, want %v", results, want)
	}
	mu.Unlock()
	// A token without claims:read (refused by config validation, but the gateway does not rely on it).
	g := NewGateway(NewReader(store), NewAuth(config.ClaimAuth{Tokens: []config.ClaimToken{{Token: "no-scope-0123456789", Tenants: []string{"*"}}}}), zerolog.Nop(), GatewayHooks{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, minePath, nil)
	req.Header.Set("Authorization", "Bearer no-scope-0123456789")
	g.ServeHTTP(rec, req)
	if rec.Code != 403 {
		t.Fatalf("token without claims:read = %d, want 403", rec.Code)
	}
}

// TestGatewayMissingClaim: an unknown pack, and a position past the end of an existing pack's index, are 404.
func TestGatewayMissingClaim(t *testing.T) {
	store := localStore(t)
	claims, err := NewChecker(store, Options{}).CheckIn(context.Background(), tenant, [][]byte{[]byte("a"), []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	base := gateway(t, store)
	past := claims[0].ID.WithPosition(2)
	last := claims[0].ID.WithPosition(MaxClaimsPerPack - 1)
	var unknown ClaimID
	copy(unknown[:], claims[0].ID[:])
	unknown[10] ^= 0xff // another pack, same day
	for _, id := range []ClaimID{past, last, unknown} {
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			resp, body := get(t, m, base+"/v1/claims/acme/"+id.String(), tokenAcme)
			if resp.StatusCode != 404 {
				t.Fatalf("%s of missing claim %s = %d %s, want 404", m, id, resp.StatusCode, body)
			}
		}
	}
	// Another tenant's namespace does not hold acme's pack.
	resp, _ := get(t, http.MethodGet, base+"/v1/claims/globex/"+claims[0].ID.String(), tokenAll)
	if resp.StatusCode != 404 {
		t.Fatalf("acme's claim under globex = %d, want 404", resp.StatusCode)
	}
	if _, _, err := NewReader(store).Fetch(context.Background(), tenant, past.String()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Fetch past the index = %v, want ErrNotFound", err)
	}
}

// TestGatewayRefusesHostileInput: tenant and claim id are validated before they become a key (invariant 3):
// traversal, encodings, lowercase or overflowing ULIDs are 400 (or 404 for a path that is not a claim path),
// never a read; a file planted outside the claim layout is never served.
func TestGatewayRefusesHostileInput(t *testing.T) {
	dir := t.TempDir()
	store, err := blob.NewLocalFS(filepath.Join(dir, "claims-root"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	claims, err := NewChecker(store, Options{}).CheckIn(context.Background(), tenant, [][]byte{[]byte("ok")})
	if err != nil {
		t.Fatal(err)
	}
	id := claims[0].ID.String()
	base := gateway(t, store)
	for _, p := range []string{
		"/v1/claims/acme/" + strings.ToLower(id),
		"/v1/claims/acme/8" + id[1:],
		"/v1/claims/acme/" + id + "0",
		"/v1/claims/acme/" + id[:25],
		"/v1/claims/acme/" + id[:25] + "U",
		"/v1/claims/a.b/" + id,
		"/v1/claims/" + strings.Repeat("a", 65) + "/" + id,
		"/v1/claims/acme/..%2f..%2fsecret",
		"/v1/claims/%2e%2e/" + id,
		"/v1/claims/acme%2F..%2F/" + id,
		"/v1/claims/acme/../../secret",
		"/v1/claims/acme/./" + id,
		"/v1/claims/acme//" + id,
		"/v1/claims/acme/" + id + "/x",
		"/v1/claims/tenant=acme/" + id,
	} {
		resp, body := get(t, http.MethodGet, base+p, tokenAll)
		if resp.StatusCode != 400 && resp.StatusCode != 404 {
			t.Fatalf("GET %s = %d %q, want 400 or 404", p, resp.StatusCode, body)
		}
		if bytes.Contains(body, []byte("secret")) || bytes.Contains(body, []byte("ok")) {
			t.Fatalf("GET %s served %q", p, body)
		}
	}
	for _, c := range []struct{ tenant, id string }{{"../x", id}, {"acme", "../../secret"}, {"", id}, {"acme", ""}, {"a/b", id}} {
		if _, _, err := NewReader(store).Fetch(context.Background(), c.tenant, c.id); !errors.Is(err, ErrInvalidClaim) {
			t.Fatalf("Fetch(%q, %q) = %v, want ErrInvalidClaim", c.tenant, c.id, err)
		}
	}
	if _, err := NewChecker(store, Options{}).CheckIn(context.Background(), "../x", [][]byte{[]byte("x")}); !errors.Is(err, ErrInvalidClaim) {
		t.Fatalf("CheckIn for tenant ../x = %v, want ErrInvalidClaim", err)
	}
}

// TestGatewayStoreErrors: a store that cannot answer is 503 with Retry-After, never 404 (a consumer would
// dead-letter a claim that still exists); a damaged pack is 503 corrupt_pack.
func TestGatewayStoreErrors(t *testing.T) {
	srv := s3fake.Start(t)
	store := mustOpen(t, srv.BlobStore(""))
	claims, err := NewChecker(store, Options{}).CheckIn(context.Background(), tenant, [][]byte{[]byte("body")})
	if err != nil {
		t.Fatal(err)
	}
	base := gateway(t, store)
	path := base + "/v1/claims/acme/" + claims[0].ID.String()

	blobtest.MustPut(t, store, PackKey(tenant, claims[0].ID), []byte("PK\x03\x04 not a pack at all, but long enough to read its head"))
	resp, body := get(t, http.MethodGet, path, tokenAcme)
	if resp.StatusCode != 503 || string(body) != `{"error":"corrupt_pack"}` {
		t.Fatalf("damaged pack = %d %s, want 503 corrupt_pack", resp.StatusCode, body)
	}
	blobtest.MustPut(t, store, PackKey(tenant, claims[0].ID), []byte("short"))
	if resp, body = get(t, http.MethodGet, path, tokenAcme); resp.StatusCode != 503 {
		t.Fatalf("truncated pack = %d %s, want 503", resp.StatusCode, body)
	}

	srv.Close()
	resp, body = get(t, http.MethodGet, path, tokenAcme)
	if resp.StatusCode != 503 || string(body) != `{"error":"store_unavailable"}` || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("store down = %d %s Retry-After %q, want 503 store_unavailable, Retry-After 1", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
}

// TestCheckInHookIsIdempotent: checking one hook in twice (a retried check-in outside dispatch) writes the same
// pack under the same key and returns the same claim; another hook gets another claim.
func TestCheckInHookIsIdempotent(t *testing.T) {
	store := localStore(t)
	c := NewChecker(store, Options{})
	at := time.Date(2026, 12, 3, 23, 59, 59, 0, time.FixedZone("x", 3600))
	hook := [16]byte{1, 2, 3}
	a, err := c.CheckInHook(context.Background(), tenant, hook, at, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CheckInHook(context.Background(), tenant, hook, at, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.CheckInHook(context.Background(), tenant, [16]byte{9}, at, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	// The second check-in found the pack in place and did not write it again.
	key := PackKey(tenant, a.ID)
	before, err := os.Stat(filepath.Join(store.Root(), key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckInHook(context.Background(), tenant, hook, at, []byte("body")); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(filepath.Join(store.Root(), key))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("a repeated check-in of the same hook rewrote its pack")
	}
	if a != b || a.ID == other.ID {
		t.Fatalf("claims %s, %s (same hook), %s (other hook)", a.ID, b.ID, other.ID)
	}
	if got := blobtest.Keys(t, store, ""); len(got) != 2 || !strings.Contains(got[0], "/dt=2026-12-03/") {
		t.Fatalf("packs %v, want 2 under the hook's UTC day", got)
	}
	sum := sha256.Sum256([]byte("body"))
	if a.SHA256 != hex.EncodeToString(sum[:]) || a.Size != 4 {
		t.Fatalf("claim %+v", a)
	}
}

// TestSweepDeletesWholeOldPartitions: the LocalFS sweeper deletes every pack of a dt= partition older than
// retention_days, of every tenant, and keeps the rest (inventory D.5).
func TestSweepDeletesWholeOldPartitions(t *testing.T) {
	store := localStore(t)
	now := time.Date(2026, 12, 10, 12, 0, 0, 0, time.UTC)
	var refs []Claim
	for _, daysAgo := range []int{10, 8, 7, 6, 0} {
		at := now.AddDate(0, 0, -daysAgo)
		for _, tn := range []string{"acme", "globex"} {
			c := NewChecker(store, Options{Now: func() time.Time { return at }})
			cl, err := c.CheckIn(context.Background(), tn, [][]byte{[]byte(fmt.Sprint(daysAgo))})
			if err != nil {
				t.Fatal(err)
			}
			if tn == "acme" {
				refs = append(refs, cl[0])
			}
		}
	}
	blobtest.MustPut(t, store, "claims/elsewhere", []byte("not a pack"))
	n, err := Sweep(context.Background(), store, 7, now)
	if err != nil {
		t.Fatal(err)
	}
	// Retention 7 days on Dec 10: partitions before Dec 3 go (10 and 8 days ago), Dec 3 and later stay.
	if n != 4 {
		t.Fatalf("swept %d packs, want 4 (two days × two tenants)", n)
	}
	r := NewReader(store)
	for i, cl := range refs {
		_, _, err := r.Fetch(context.Background(), "acme", cl.ID.String())
		if gone := errors.Is(err, ErrNotFound); gone != (i < 2) {
			t.Fatalf("claim %d days ago: Fetch = %v", []int{10, 8, 7, 6, 0}[i], err)
		}
	}
	if _, err := store.Get(context.Background(), "claims/elsewhere"); err != nil {
		t.Fatalf("the sweep deleted a key outside the layout: %v", err)
	}
	if _, err := Sweep(context.Background(), store, 0, now); err == nil {
		t.Fatal("Sweep with retention 0 ran")
	}
}

// TestClaimIDs: positions live in the last 16 bits; parsing is strict (canonical uppercase only).
func TestClaimIDs(t *testing.T) {
	p := newPackID(time.UnixMilli(1_700_000_000_123), [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	c := p.WithPosition(0xBEEF)
	if c.Position() != 0xBEEF || c.Pack() != p || c.Time().UnixMilli() != 1_700_000_000_123 {
		t.Fatalf("id %s: position %x pack %s time %d", c, c.Position(), c.Pack(), c.Time().UnixMilli())
	}
	back, err := ParseClaimID(c.String())
	if err != nil || back != c {
		t.Fatalf("ParseClaimID(%s) = %s, %v", c, back, err)
	}
	tn, id, err := ParseRef(Ref("acme", c))
	if err != nil || tn != "acme" || id != c {
		t.Fatalf("ParseRef = %s %s %v", tn, id, err)
	}
	for _, s := range []string{strings.ToLower(c.String()), "8" + c.String()[1:], c.String()[:25], c.String() + "0", ""} {
		if _, err := ParseClaimID(s); !errors.Is(err, ErrInvalidClaim) {
			t.Fatalf("ParseClaimID(%q) = %v, want ErrInvalidClaim", s, err)
		}
	}
}
