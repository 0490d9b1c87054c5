package edge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/verify"
)

func penSource(secrets ...string) config.Source {
	return config.Source{Tenant: "default", Sinks: []config.SinkSpec{{Type: "log"}},
		Verify: verify.Spec{Type: "github", Secret: verify.Secrets(secrets)}, OnVerifyFailure: "quarantine"}
}

// Design: ":quarantine (202, held in a durable pen with a per-source rate limit and a
// byte cap — 429 or 503 when either refuses)"; a full pen "never evicts a held hook".
func TestQuarantinePen(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		c.Sources["pen"] = penSource("old-secret")
		c.Quarantine.Burst, c.Quarantine.Rate = 3, 0.001
		// An entry of a 4000-byte body costs 4000 bytes plus its head (well under 500): two fit.
		c.Quarantine.MaxBytes = 10_000
		c.Quarantine.SourceShare, c.Quarantine.TenantShare = 1, 1 // the node's cap alone
	}, nil)
	body := []byte(strings.Repeat("q", 4000))
	for range 2 {
		r := postBody(t, inst, "/webhooks/pen", body, "X-Hub-Signature-256", forgedSig)
		r.expect(t, 202, "")
		if r.body["status"] != "quarantined" || r.body["reason"] != "no_match" {
			t.Fatalf("202 body %s", r.raw)
		}
	}
	full := postBody(t, inst, "/webhooks/pen", body, "X-Hub-Signature-256", forgedSig)
	full.expect(t, 503, "quarantine_full")
	if full.retryAfter != "60" {
		t.Fatalf("Retry-After %q", full.retryAfter)
	}
	postBody(t, inst, "/webhooks/pen", body, "X-Hub-Signature-256", forgedSig).expect(t, 429, "quarantine_rate_limited")
	if bytes, n := inst.Store().QuarantineStats(); n != 2 || bytes < 8000 || bytes > 9000 {
		t.Fatalf("pen holds %d entries, %d bytes; want the 2 accepted, none evicted", n, bytes)
	}
	if n := len(hooks(t, inst)); n != 0 {
		t.Fatalf("%d quarantined hooks were committed as hooks", n)
	}
}

// Design: "A quarantine replay job re-verifies held hooks against the source's current
// verifier and commits the ones that pass with their original id"; it survives a restart.
func TestQuarantineReleaseAfterRotation(t *testing.T) {
	dir := t.TempDir()
	body := []byte(`{"event":"rotated"}`)
	// The provider signs with a new secret the node does not know yet.
	inst := start(t, func(c *config.Config) {
		c.Node.DataDir = dir
		c.Sources["pen"] = penSource("old-secret")
	}, nil)
	postBody(t, inst, "/webhooks/pen", body, "X-Hub-Signature-256", sign("new-secret", body)).expect(t, 202, "")
	postBody(t, inst, "/webhooks/pen", []byte(`{"forged":1}`), "X-Hub-Signature-256", forgedSig).expect(t, 202, "")
	held, err := inst.Store().ListQuarantine("", 10)
	if err != nil || len(held) != 2 {
		t.Fatalf("held %v %v", held, err)
	}
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	// After the restart the source lists both secrets: the rotated hook now verifies.
	inst = start(t, func(c *config.Config) {
		c.Node.DataDir = dir
		c.Sources["pen"] = penSource("new-secret", "old-secret")
	}, nil)
	rep, err := inst.Edge().ReleaseQuarantine("pen", 100)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Released != 1 || rep.Held != 1 {
		t.Fatalf("release %+v; want 1 released, 1 still held", rep)
	}
	hs := hooks(t, inst)
	if len(hs) != 1 || string(hs[0].Body) != string(body) {
		t.Fatalf("committed %d hooks", len(hs))
	}
	if hs[0].Verification != store.VerificationOK || hs[0].Flagged {
		t.Fatalf("released hook stored with verification %q flagged=%v, want ok", hs[0].Verification, hs[0].Flagged)
	}
	found := false
	for _, h := range held {
		found = found || h.ID == hs[0].ID
	}
	if !found {
		t.Fatal("the released hook did not keep its original id")
	}
	if _, n := inst.Store().QuarantineStats(); n != 1 {
		t.Fatalf("pen holds %d; the forged hook must stay", n)
	}
}

func sign(secret string, body []byte) string {
	m := hmacSHA256(secret, body)
	return "sha256=" + m
}

// forgedSig is well formed but signed with no configured key.
var forgedSig = "sha256=" + strings.Repeat("0", 64)

// Design: "at most 1 000 writes waiting for its disk write (503 overload) ... a store that
// cannot write is a 503".
func TestQuarantineWaitingWritesAndFailedWrites(t *testing.T) {
	h := newHold()
	inst := start(t, func(c *config.Config) {
		c.Sources["pen"] = penSource("s")
		c.Quarantine.MaxPending = 2
	}, h.faults())
	done := make(chan reply, 2)
	for range 2 {
		go func() { done <- send(inst, "/webhooks/pen", []byte(`{}`), "X-Hub-Signature-256", forgedSig) }()
	}
	poll.True(t, 10*time.Second, "two pen writes waiting", func() bool { return inst.Edge().QuarantineWaiting() == 2 })
	postBody(t, inst, "/webhooks/pen", []byte(`{}`), "X-Hub-Signature-256", forgedSig).expect(t, 503, "overload")
	h.fail.Store(true)
	close(h.gate)
	for range 2 {
		r := <-done
		if r.status == 202 {
			t.Fatalf("a pen write that failed was answered 202")
		}
		r.expect(t, 503, "store_unavailable")
	}
	if _, n := inst.Store().QuarantineStats(); n != 0 {
		t.Fatalf("pen holds %d after failed writes", n)
	}
}
