package edge_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/verify"
)

const ghSecret = "It's a Secret to Everybody"

func ghSign(body []byte) string { return "sha256=" + hmacSHA256(ghSecret, body) }

func hmacSHA256(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func ghSource(tenant, onFailure string) config.Source {
	return config.Source{Tenant: tenant, Sinks: []config.SinkSpec{{Type: "log"}},
		Verify: verify.Spec{Type: "github", Secret: verify.Secrets{ghSecret}}, OnVerifyFailure: onFailure}
}

// Design: ":reject (401, nothing stored)"; the 401 always means a failed signature.
func TestVerificationRejects(t *testing.T) {
	inst := start(t, func(c *config.Config) { c.Sources["gh"] = ghSource("acme", "reject") }, nil)
	body := []byte(`{"action":"opened"}`)
	postBody(t, inst, "/webhooks/gh", body, "X-Hub-Signature-256", ghSign(body)).expect(t, 201, "")
	r := postBody(t, inst, "/webhooks/gh", body, "X-Hub-Signature-256", ghSign([]byte("other")))
	r.expect(t, 401, "verification_failed")
	if r.body["reason"] != "no_match" {
		t.Fatalf("reason %v", r.body["reason"])
	}
	postBody(t, inst, "/webhooks/gh", body).expect(t, 401, "verification_failed")
	if n := len(hooks(t, inst)); n != 1 {
		t.Fatalf("%d hooks stored; a rejected hook must store nothing", n)
	}
}

// Design: ":accept_flag (commits anyway, envelope marked flagged: true)"; "one accepted
// flagged ... spends its source's quarantine bucket (429 quarantine_rate_limited past it),
// and a flagged hook gets no dedupe key, so it cannot suppress the real event".
func TestAcceptFlag(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		src := ghSource("default", "accept_flag")
		src.Dedupe = &config.DedupeSpec{Preset: "github", TTLSeconds: 3600}
		c.Sources["gh"] = src
		c.Quarantine.Burst, c.Quarantine.Rate = 2, 0.001
	}, nil)
	forged := []byte(`{"forged":true}`)
	for range 2 {
		postBody(t, inst, "/webhooks/gh", forged, "X-Hub-Signature-256", "sha256=00", "X-GitHub-Delivery", "evt-1").expect(t, 201, "")
	}
	r := postBody(t, inst, "/webhooks/gh", forged, "X-Hub-Signature-256", "sha256=00")
	r.expect(t, 429, "quarantine_rate_limited")
	if r.retryAfter == "" {
		t.Fatal("429 without Retry-After")
	}
	real := []byte(`{"real":true}`)
	postBody(t, inst, "/webhooks/gh", real, "X-Hub-Signature-256", ghSign(real), "X-GitHub-Delivery", "evt-1").expect(t, 201, "")
	flagged, withKey := 0, 0
	for _, h := range hooks(t, inst) {
		if h.Flagged {
			flagged++
			if h.DedupeKey != "" {
				t.Fatal("a flagged hook carries a dedupe key")
			}
		} else if h.DedupeKey == "evt-1" {
			withKey++
		}
	}
	if flagged != 2 || withKey != 1 {
		t.Fatalf("flagged=%d real-with-key=%d", flagged, withKey)
	}
}

// Design: "because the charge comes after verification, a flood of forged requests spends
// no budget and can never lock a tenant out".
func TestForgedFloodSpendsNoTenantBudget(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		c.Sources["gh"] = ghSource("acme", "reject")
		c.RateLimits.Tenants = map[string]config.TenantLimits{"acme": {Rate: 0.001, Burst: 2}}
	}, nil)
	for range 50 {
		postBody(t, inst, "/webhooks/gh", []byte(`{}`), "X-Hub-Signature-256", "sha256=dead").expect(t, 401, "verification_failed")
	}
	body := []byte(`{"ok":1}`)
	for range 2 {
		postBody(t, inst, "/webhooks/gh", body, "X-Hub-Signature-256", ghSign(body)).expect(t, 201, "")
	}
	r := postBody(t, inst, "/webhooks/gh", body, "X-Hub-Signature-256", ghSign(body))
	r.expect(t, 429, "rate_limited")
	if r.retryAfter == "" {
		t.Fatal("429 rate_limited without Retry-After")
	}
	if n := len(hooks(t, inst)); n != 2 {
		t.Fatalf("%d hooks stored, want the 2 within budget", n)
	}
}

// Design: "authorization, cookie, x-api-key and the other credential headers are dropped
// by default, and a hashed one is kept as sha256:<hex>".
func TestStoreHeadersPolicy(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		c.Sources["hashed"] = config.Source{Tenant: "default", Sinks: []config.SinkSpec{{Type: "log"}},
			StoreHeaders: config.StoreHeaders{Mode: "hash"}}
	}, nil)
	postBody(t, inst, "/webhooks/sample", []byte(`{}`), "Authorization", "Bearer s3cret", "X-Api-Key", "k1").expect(t, 201, "")
	postBody(t, inst, "/webhooks/hashed", []byte(`{}`), "Authorization", "Bearer s3cret").expect(t, 201, "")
	sum := sha256.Sum256([]byte("Bearer s3cret"))
	for _, h := range hooks(t, inst) {
		for _, hd := range h.Headers {
			if strings.Contains(hd.Value, "s3cret") || hd.Value == "k1" {
				t.Fatalf("source %s stored a credential in clear: %s", h.Source, hd.Name)
			}
			if h.Source == "sample" && (hd.Name == "authorization" || hd.Name == "x-api-key") {
				t.Fatalf("default policy kept %s", hd.Name)
			}
			if h.Source == "hashed" && hd.Name == "authorization" && hd.Value != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Fatalf("hashed authorization %q", hd.Value)
			}
		}
	}
}

// Design: "the pre-read admission ... a limit per client address (429 ip_rate_limited),
// per node (429 node_rate_limited) and per source in body bytes per second (429
// source_rate_limited), plus the tenant's max_body_bytes (413)".
func TestPreReadAdmission(t *testing.T) {
	cases := []struct {
		name, reason string
		status       int
		mutate       func(*config.Config)
		body         []byte
	}{
		{"ip", "ip_rate_limited", 429, func(c *config.Config) { c.RateLimits.IP = &config.Rate{Rate: 0.001, Burst: 2} }, []byte(`{}`)},
		{"node", "node_rate_limited", 429, func(c *config.Config) { c.RateLimits.Node = &config.Rate{Rate: 0.001, Burst: 2} }, []byte(`{}`)},
		{"source bytes", "source_rate_limited", 429, func(c *config.Config) {
			c.RateLimits.SourceBytes = &config.Rate{Rate: 0.001, Burst: 4096}
		}, []byte(strings.Repeat("x", 2000))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inst := start(t, tc.mutate, nil)
			for range 2 {
				postBody(t, inst, "/webhooks/sample", tc.body).expect(t, 201, "")
			}
			r := postBody(t, inst, "/webhooks/sample", tc.body)
			r.expect(t, tc.status, tc.reason)
			if r.retryAfter == "" {
				t.Fatal("no Retry-After")
			}
		})
	}
	t.Run("tenant body cap", func(t *testing.T) {
		inst := start(t, func(c *config.Config) {
			c.Sources["acme-gh"] = config.Source{Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}}}
			c.RateLimits.Tenants = map[string]config.TenantLimits{"acme": {MaxBodyBytes: 100}}
		}, nil)
		r := postBody(t, inst, "/webhooks/acme-gh", []byte(strings.Repeat("y", 101)))
		r.expect(t, 413, "payload_too_large")
		if r.body["limit"] != float64(100) {
			t.Fatalf("limit %v", r.body["limit"])
		}
		postBody(t, inst, "/webhooks/sample", []byte(strings.Repeat("y", 101))).expect(t, 201, "")
	})
}

// Design: "A tenant can also be given a share of the batchers (max_queue,
// max_queue_bytes): past it the tenant gets 429 tenant_overload, and the other tenants
// never see a 503 overload it caused."
func TestTenantOverloadIsolates(t *testing.T) {
	h := newHold()
	inst := start(t, func(c *config.Config) {
		c.Batcher.Partitions, c.Batcher.MaxQueue = 1, 4
		c.Sources["acme-gh"] = config.Source{Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}}}
		c.RateLimits.Tenants = map[string]config.TenantLimits{"acme": {MaxQueue: 2}}
	}, h.faults())
	done := make(chan reply, 4)
	for i := range 2 {
		go func() { done <- send(inst, "/webhooks/acme-gh", fmt.Appendf(nil, `{"a":%d}`, i)) }()
	}
	poll.True(t, 10*time.Second, "acme's share in flight", func() bool { n, _ := queue(inst); return n == 2 })
	r := postBody(t, inst, "/webhooks/acme-gh", []byte(`{"a":"over"}`))
	r.expect(t, 429, "tenant_overload")
	go func() { done <- send(inst, "/webhooks/sample", []byte(`{"other":1}`)) }()
	poll.True(t, 10*time.Second, "the other tenant's hook admitted", func() bool { n, _ := queue(inst); return n == 3 })
	close(h.gate)
	for range 3 {
		(<-done).expect(t, 201, "")
	}
}
