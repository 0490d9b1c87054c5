package edge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/verify"
)

// One source's trust bundle carries the configured verifier, policy, dedupe key and header policy, with
// the defaults of a source that sets none (inventory B.3: on_verify_failure reject, dedupe none).
func TestNewTrustBuildsTheSourcesBundle(t *testing.T) {
	tr, err := NewTrust(config.Source{Tenant: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.OnFailure != config.OnVerifyReject || tr.Dedupe != nil || tr.TrustURLTenant {
		t.Fatalf("defaults %+v", tr)
	}
	if r := tr.Verifier.Verify(&verify.Request{Now: time.Now()}); r.Status != verify.StatusSkipped {
		t.Fatalf("a source without verify: status %v", r.Status)
	}

	src := config.Source{
		Verify:          verify.Spec{Type: "github", Secret: verify.Secrets{"s3cret"}},
		OnVerifyFailure: config.OnVerifyQuarantine,
		Dedupe:          &config.DedupeSpec{Preset: "github", TTLSeconds: 60},
		StoreHeaders:    config.StoreHeaders{Mode: config.StoreHeadersHash},
		TrustURLTenant:  true,
	}
	tr, err = NewTrust(src)
	if err != nil {
		t.Fatal(err)
	}
	if tr.OnFailure != config.OnVerifyQuarantine || !tr.TrustURLTenant || tr.Dedupe.TTL() != time.Minute {
		t.Fatalf("bundle %+v", tr)
	}
	body := []byte(`{"zen":"hi"}`)
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(body)
	hdrs := headerLookup("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)), "X-GitHub-Delivery", "d-1")
	if r := tr.Verifier.Verify(&verify.Request{Body: body, Header: hdrs, Now: time.Now()}); r.Status != verify.StatusOK {
		t.Fatalf("signed request: %v %v", r.Status, r.Reason)
	}
	if k := tr.Dedupe.Key(hdrs, body); k != "d-1" {
		t.Fatalf("dedupe key %q", k)
	}
	kept, _ := tr.Headers.Apply([]store.Header{{Name: "authorization", Value: "x"}}, nil)
	if len(kept) != 1 || kept[0].Value != hashed("x") {
		t.Fatalf("hash mode: %v", kept)
	}
}

// Design: "A token's header is dropped from what is stored, whatever the store_headers policy".
func TestNewTrustDropsTheTokenHeaderInHashMode(t *testing.T) {
	tr, err := NewTrust(config.Source{
		Verify:       verify.Spec{Type: "token", Location: "header", Name: "X-Webhook-Token", Secret: verify.Secrets{"t0k"}},
		StoreHeaders: config.StoreHeaders{Mode: config.StoreHeadersHash},
	})
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := tr.Headers.Apply([]store.Header{{Name: "x-webhook-token", Value: "t0k"}, {Name: "cookie", Value: "c"}}, nil)
	if len(kept) != 1 || kept[0].Name != "cookie" || kept[0].Value != hashed("c") {
		t.Fatalf("kept %v", kept)
	}
}

func TestNewTrustRefusesAnInvalidSource(t *testing.T) {
	if _, err := NewTrust(config.Source{Verify: verify.Spec{Type: "github"}}); !errors.Is(err, verify.ErrBadSecret) {
		t.Fatalf("verifier without secret: %v", err)
	}
	for _, src := range []config.Source{
		{OnVerifyFailure: "drop"},
		{StoreHeaders: config.StoreHeaders{Mode: "keep"}},
		{Dedupe: &config.DedupeSpec{Preset: "bitbucket", TTLSeconds: 1}},
	} {
		if _, err := NewTrust(src); !errors.Is(err, ErrBadTrust) {
			t.Errorf("%+v: err %v, want ErrBadTrust", src, err)
		}
	}
}
