package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
)

func sampleHeaders() []store.Header {
	return []store.Header{
		{Name: "x-github-event", Value: "push"},
		{Name: "authorization", Value: "Bearer b34rer"},
		{Name: "cookie", Value: "sid=c00kie"},
		{Name: "x-api-key", Value: "k3y"},
		{Name: "proxy-authorization", Value: "Basic cHJveHk="},
		{Name: "set-cookie", Value: "a=b"},
		{Name: "x-auth-token", Value: "t0k"},
		{Name: "x-tenant-secret", Value: "extra-s3cret"},
		{Name: "x-hub-signature-256", Value: "sha256=abc"},
		{Name: "x-token", Value: "verifier-t0ken"},
	}
}

func hashed(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func asMap(hdrs []store.Header) map[string]string {
	m := map[string]string{}
	for _, h := range hdrs {
		m[h.Name] = h.Value
	}
	return m
}

// Design: "authorization, cookie, x-api-key and the other credential headers are dropped by default";
// "A token's header is dropped from what is stored, whatever the store_headers policy".
func TestStoreHeadersDropModeDropsEveryCredential(t *testing.T) {
	p := NewHeaderPolicy(config.StoreHeaders{Mode: config.StoreHeadersDrop, Extra: []string{"X-Tenant-Secret"}}, []string{"X-Token"})
	kept, _ := p.Apply(sampleHeaders(), nil)
	want := map[string]string{"x-github-event": "push", "x-hub-signature-256": "sha256=abc"}
	if got := asMap(kept); len(got) != len(want) || got["x-github-event"] != "push" || got["x-hub-signature-256"] != "sha256=abc" {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if kept[0].Name != "x-github-event" || kept[1].Name != "x-hub-signature-256" {
		t.Fatalf("order changed: %v", kept)
	}
	// The zero policy (a Source built in code) drops the built-in credentials too.
	kept, _ = HeaderPolicy{}.Apply(sampleHeaders(), nil)
	if got := asMap(kept); got["authorization"] != "" || got["cookie"] != "" || len(got) != 4 {
		t.Fatalf("zero policy kept %v", got)
	}
}

// Design: "a hashed one is kept as sha256:<hex>". The verifier's token header is still dropped.
func TestStoreHeadersHashModeKeepsADigestOfEachCredential(t *testing.T) {
	p := NewHeaderPolicy(config.StoreHeaders{Mode: config.StoreHeadersHash, Extra: []string{"x-tenant-secret"}}, []string{"x-token"})
	in := sampleHeaders()
	scratch := make([]byte, 0, 8)
	scratch = append(scratch, "keep"...)
	kept, scratch := p.Apply(in, scratch)
	got := asMap(kept)
	for _, h := range sampleHeaders() {
		switch h.Name {
		case "x-github-event", "x-hub-signature-256":
			if got[h.Name] != h.Value {
				t.Errorf("%s changed to %q", h.Name, got[h.Name])
			}
		case "x-token":
			if _, ok := got[h.Name]; ok {
				t.Error("the token verifier's header was kept in hash mode")
			}
		default:
			if got[h.Name] != hashed(h.Value) {
				t.Errorf("%s = %q, want %q", h.Name, got[h.Name], hashed(h.Value))
			}
		}
	}
	if len(kept) != 9 {
		t.Fatalf("kept %d headers, want 9", len(kept))
	}
	if string(scratch[:4]) != "keep" || len(scratch) != 4+7*hashedLen {
		t.Fatalf("scratch lost its prefix or has the wrong length: %d", len(scratch))
	}
	// Reusing the returned scratch for the next request does not reallocate it.
	next := scratch[:0]
	_, again := p.Apply(sampleHeaders(), next)
	if &again[0] != &scratch[0] {
		t.Fatal("a large enough scratch was reallocated")
	}
}

// DESIGN §3: store_headers is CPU work on the request path; with a warm scratch it allocates nothing.
func TestStoreHeadersApplyDoesNotAllocate(t *testing.T) {
	p := NewHeaderPolicy(config.StoreHeaders{Mode: config.StoreHeadersHash}, []string{"authorization"})
	src := sampleHeaders()
	hdrs := make([]store.Header, len(src))
	scratch := make([]byte, 0, 1024)
	if a := testing.AllocsPerRun(200, func() {
		copy(hdrs, src)
		_, scratch = p.Apply(hdrs, scratch[:0])
	}); a != 0 {
		t.Fatalf("Apply allocates %v per call", a)
	}
}
