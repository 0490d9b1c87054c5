package edge_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/verify"
)

// tenantPath switches an instance to tenant_path routing with a shared github source "gh".
func tenantPath(mutate func(c *config.Config, gh *config.Source)) func(*config.Config) {
	return func(c *config.Config) {
		c.HTTP.Routing = "tenant_path"
		gh := ghSource("default", "reject")
		if mutate != nil {
			mutate(c, &gh)
		}
		c.Sources["gh"] = gh
		delete(c.Sources, "sample") // shared and unverified: boot refuses it under tenant_path
	}
}

// Issue: "bound the tenants a URL may mint: an allow-list". A shared source with url_tenants serves
// only the listed tenants; any other tenant's URL finds no source.
func TestURLTenantAllowList(t *testing.T) {
	inst := start(t, tenantPath(func(_ *config.Config, gh *config.Source) { gh.URLTenants = []string{"acme"} }), nil)
	body := []byte(`{"n":1}`)
	postBody(t, inst, "/webhooks/acme/gh", body, "X-Hub-Signature-256", ghSign(body)).expect(t, 201, "")
	postBody(t, inst, "/webhooks/globex/gh", body, "X-Hub-Signature-256", ghSign(body)).expect(t, 404, "unknown_source")
	if hs := hooks(t, inst); len(hs) != 1 || hs[0].Tenant != "acme" {
		t.Fatalf("hooks %+v, want one of tenant acme", hs)
	}
}

// Issue: "rotating tenant names mints store ordinals, rate buckets and fairness shares without bound
// (bound the tenants a URL may mint: ... a cap with a documented default, and a clear refusal past it)".
// Past http.max_url_tenants a new tenant's URL is 404 unknown_source; tenants already served, and the
// tenants the config names, still pass. Forged requests cannot fill the cap.
func TestURLTenantsCappedPerNode(t *testing.T) {
	inst := start(t, tenantPath(func(c *config.Config, _ *config.Source) { c.HTTP.MaxURLTenants = 2 }), nil)
	body := []byte(`{"n":1}`)
	sig := ghSign(body)
	// Forged requests mint nothing: only a verified request's tenant counts against the cap.
	for _, tenant := range []string{"f1", "f2", "f3"} {
		postBody(t, inst, "/webhooks/"+tenant+"/gh", body, "X-Hub-Signature-256", ghSign([]byte("forged"))).expect(t, 401, "verification_failed")
	}
	for _, tenant := range []string{"t1", "t2"} {
		postBody(t, inst, "/webhooks/"+tenant+"/gh", body, "X-Hub-Signature-256", sig).expect(t, 201, "")
	}
	postBody(t, inst, "/webhooks/t3/gh", body, "X-Hub-Signature-256", sig).expect(t, 404, "unknown_source")
	postBody(t, inst, "/webhooks/t1/gh", body, "X-Hub-Signature-256", sig).expect(t, 201, "")
	// acme is named by the config (the fixture's acme-gh source): never counted, always served.
	postBody(t, inst, "/webhooks/acme/gh", body, "X-Hub-Signature-256", sig).expect(t, 201, "")
	got := map[string]int{}
	for _, h := range hooks(t, inst) {
		got[h.Tenant]++
	}
	if len(got) != 3 || got["t1"] != 2 || got["t3"] != 0 {
		t.Fatalf("hooks by tenant %v, want t1 x2, t2, acme and no t3", got)
	}
}

// Issue: "a signed hook replayed under another tenant's path is stored again and is no duplicate there
// (give a shared verified source a way to catch it ...)". With tenant_secrets each URL tenant verifies
// with its own secret: acme's signed hook replayed under beta's URL fails verification (401), and a tenant
// the source holds no secret for finds no source.
func TestTenantSecretsStopCrossTenantReplay(t *testing.T) {
	inst := start(t, tenantPath(func(_ *config.Config, gh *config.Source) {
		gh.TenantSecrets = map[string]verify.Secrets{"acme": {"acme-secret"}, "beta": {"beta-secret"}}
	}), nil)
	body := []byte(`{"charge":"ch_1"}`)
	acmeSig := "sha256=" + hmacSHA256("acme-secret", body)
	postBody(t, inst, "/webhooks/acme/gh", body, "X-Hub-Signature-256", acmeSig).expect(t, 201, "")
	postBody(t, inst, "/webhooks/beta/gh", body, "X-Hub-Signature-256", acmeSig).expect(t, 401, "verification_failed")
	postBody(t, inst, "/webhooks/beta/gh", body, "X-Hub-Signature-256", "sha256="+hmacSHA256("beta-secret", body)).expect(t, 201, "")
	// The source-wide secret no longer verifies anyone's hooks, and an unlisted tenant has no source.
	postBody(t, inst, "/webhooks/acme/gh", body, "X-Hub-Signature-256", ghSign(body)).expect(t, 401, "verification_failed")
	postBody(t, inst, "/webhooks/gamma/gh", body, "X-Hub-Signature-256", ghSign(body)).expect(t, 404, "unknown_source")
}
