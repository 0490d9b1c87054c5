package edge_test

import (
	"bytes"
	"testing"

	"github.com/ankusa-go/ankusa/config"
)

// A source's failed verifications spend its verification budget (sources.<id>.verify_failure_bytes);
// past it the source is refused before its body is read (429 verify_rate_limited with Retry-After), so
// one sender's forgeries cannot keep the node's cores hashing. Other sources keep their own budget.
func TestForgedFloodMeetsVerificationBudget(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		src := ghSource("acme", "reject")
		// One forged 2 KB body against one key spends 2 KB: the second forgery finds the budget in debt.
		src.VerifyFailureBytes = &config.Rate{Rate: 1, Burst: 1024}
		c.Sources["gh"] = src
		c.Sources["gh2"] = ghSource("acme", "reject")
	}, nil)
	body := bytes.Repeat([]byte("f"), 2048)
	forged := ghSign([]byte("something else"))
	postBody(t, inst, "/webhooks/gh", body, "X-Hub-Signature-256", forged).expect(t, 401, "verification_failed")
	r := postBody(t, inst, "/webhooks/gh", body, "X-Hub-Signature-256", forged)
	r.expect(t, 429, "verify_rate_limited")
	if r.retryAfter == "" {
		t.Fatal("429 without Retry-After")
	}
	// The budget is the source's: while it is spent, even a signed hook waits (the provider retries).
	postBody(t, inst, "/webhooks/gh", body, "X-Hub-Signature-256", ghSign(body)).expect(t, 429, "verify_rate_limited")
	// Another source is untouched.
	postBody(t, inst, "/webhooks/gh2", body, "X-Hub-Signature-256", ghSign(body)).expect(t, 201, "")
	postBody(t, inst, "/webhooks/gh2", body, "X-Hub-Signature-256", forged).expect(t, 401, "verification_failed")
}
