package edge_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/poll"
)

// postAsync posts from a goroutine; the reply carries any error to the test goroutine.
func postAsync(inst *instance.Instance, path string, body []byte, headers ...string) <-chan reply {
	ch := make(chan reply, 1)
	go func() { ch <- send(inst, path, body, headers...) }()
	return ch
}

func forge(t *testing.T, inst *instance.Instance, source string, size int) reply {
	t.Helper()
	return postBody(t, inst, "/webhooks/"+source, bytes.Repeat([]byte("q"), size), "X-Hub-Signature-256", forgedSig)
}

func quotaRefused(inst *instance.Instance, source, quota string) float64 {
	var m dto.Metric
	if err := inst.Telemetry().Metrics.Trust.QuotaRefused.WithLabelValues(source, quota).Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// Issue 8 item 6: "The quarantine pen is one node-wide byte budget that fills in seconds". Each source, and
// each tenant, holds at most its share of quarantine.max_bytes: a source that filled its share is refused 503
// quarantine_full while another source of the node still gets 202, and each refusal is counted by source.
func TestPenShareKeepsOneSourceFromFillingThePen(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		for _, id := range []string{"pa", "pb", "pc"} {
			c.Sources[id] = penSource("s")
		}
		pc := c.Sources["pc"]
		pc.Tenant = "globex"
		c.Sources["pc"] = pc
		// An entry of a 4000-byte body costs 4000 to 4500 bytes (its head included): a source's share
		// (15 000) holds three, a tenant's (22 500) five.
		c.Quarantine.MaxBytes = 50_000
		c.Quarantine.SourceShare, c.Quarantine.TenantShare = 0.3, 0.45
	}, nil)
	for range 3 {
		forge(t, inst, "pa", 4000).expect(t, 202, "")
	}
	full := forge(t, inst, "pa", 4000)
	full.expect(t, 503, "quarantine_full")
	if full.retryAfter != "60" {
		t.Fatalf("Retry-After %q", full.retryAfter)
	}
	forge(t, inst, "pb", 4000).expect(t, 202, "")
	forge(t, inst, "pb", 4000).expect(t, 202, "")
	// Tenant default holds five entries now: a sixth would pass the tenant's share.
	forge(t, inst, "pb", 4000).expect(t, 503, "quarantine_full")
	forge(t, inst, "pc", 4000).expect(t, 202, "")
	if _, n := inst.Store().QuarantineStats(); n != 6 {
		t.Fatalf("pen holds %d entries, want 6", n)
	}
	if a, b := quotaRefused(inst, "pa", "quarantine_source"), quotaRefused(inst, "pb", "quarantine_tenant"); a != 1 || b != 1 {
		t.Fatalf("refusals counted: pa %v by its source share, pb %v by its tenant share; want 1, 1", a, b)
	}
}

// The pen's budgets count what an entry stores, its head included: a flood of empty bodies with large heads
// fills the pen as surely as large bodies, and is refused the same way.
func TestPenBudgetCountsTheHeadOfAnEmptyBody(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		c.Sources["pen"] = penSource("s")
		c.Quarantine.MaxBytes = 2500 // one entry with a 1500-byte header
		c.Quarantine.SourceShare, c.Quarantine.TenantShare = 1, 1
	}, nil)
	head := strings.Repeat("h", 1500)
	postBody(t, inst, "/webhooks/pen", nil, "X-Hub-Signature-256", forgedSig, "X-Padding", head).expect(t, 202, "")
	postBody(t, inst, "/webhooks/pen", nil, "X-Hub-Signature-256", forgedSig, "X-Padding", head).
		expect(t, 503, "quarantine_full")
	if bytes, n := inst.Store().QuarantineStats(); n != 1 || bytes < 1500 {
		t.Fatalf("pen holds %d entries, %d bytes; want 1 entry counted with its head", n, bytes)
	}
}

// quarantine.retention_seconds: an entry nobody released leaves the pen after the retention, and its bytes
// are free again for the source.
func TestPenEntriesExpireAfterRetention(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		c.Sources["pen"] = penSource("s")
		c.Quarantine.MaxBytes = 6000 // one entry of a 4000-byte body
		c.Quarantine.SourceShare, c.Quarantine.TenantShare = 1, 1
		c.Quarantine.RetentionSeconds = 1
	}, nil)
	forge(t, inst, "pen", 4000).expect(t, 202, "")
	forge(t, inst, "pen", 4000).expect(t, 503, "quarantine_full")
	poll.True(t, 10*time.Second, "the expired entry swept", func() bool {
		bytes, n := inst.Store().QuarantineStats()
		_, bySource, byTenant := inst.Store().QuarantineUsage("pen", "default")
		return bytes == 0 && n == 0 && bySource == 0 && byTenant == 0
	})
	forge(t, inst, "pen", 4000).expect(t, 202, "")
}

// Issue 8 item 12, "a pen write that lands after its 503": a write withdrawn at its timeout before its group
// started never lands, and a write whose group started is waited out and answered by its outcome.
func TestPenAnswerAndOutcomeAgree(t *testing.T) {
	var entered atomic.Int64
	gate := make(chan struct{})
	faults := &store.Faults{BeforeCommit: func() error {
		entered.Add(1)
		<-gate
		return nil
	}}
	inst := start(t, func(c *config.Config) {
		c.Sources["pen"] = penSource("s")
		c.Quarantine.WriteTimeoutMS = 300
	}, faults)
	body := []byte(`{"n":"started"}`)
	started := postAsync(inst, "/webhooks/pen", body, "X-Hub-Signature-256", forgedSig)
	poll.True(t, 10*time.Second, "the first pen write in its synced write", func() bool { return entered.Load() == 1 })
	// The pen's writer is busy with the first group: this one waits in its buffer past its timeout.
	queued := postAsync(inst, "/webhooks/pen", []byte(`{"n":"queued"}`), "X-Hub-Signature-256", forgedSig)
	(<-queued).expect(t, 503, "store_unavailable")
	select {
	case s := <-started:
		t.Fatalf("a pen write whose group started was answered before its group returned: %d %s", s.status, s.raw)
	default:
	}
	close(gate)
	(<-started).expect(t, 202, "")
	held, err := inst.Store().ListQuarantine("", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 {
		t.Fatalf("pen holds %+v; want only the write answered 202", held)
	}
	if e, err := inst.Store().GetQuarantine(held[0].ReceivedAt, held[0].ID); err != nil || !bytes.Equal(e.Hook.Body, body) {
		t.Fatalf("pen holds %q (%v); want the write answered 202", e.Hook.Body, err)
	}
	// Nothing lands later either: the withdrawn write is gone for good.
	forge(t, inst, "pen", 10).expect(t, 202, "")
	if _, n := inst.Store().QuarantineStats(); n != 2 {
		t.Fatalf("pen holds %d entries, want 2", n)
	}
}

// The design: a store that cannot write "is a 503 that spends no token". A failed pen write gives back the
// token its request took from the source's pen bucket.
func TestFailedPenWriteRefundsItsToken(t *testing.T) {
	var fail atomic.Bool
	faults := &store.Faults{BeforeCommit: func() error {
		if fail.Load() {
			return errors.New("injected write failure")
		}
		return nil
	}}
	inst := start(t, func(c *config.Config) {
		c.Sources["pen"] = penSource("s")
		c.Quarantine.Burst, c.Quarantine.Rate = 1, 0.001
	}, faults)
	fail.Store(true)
	forge(t, inst, "pen", 10).expect(t, 503, "store_unavailable")
	fail.Store(false)
	forge(t, inst, "pen", 10).expect(t, 202, "")
	forge(t, inst, "pen", 10).expect(t, 429, "quarantine_rate_limited")
}

// The same rule for accept_flag: a flagged hook spends its source's quarantine token, and
// when its commit fails nothing was stored, so the token comes back.
func TestFailedFlaggedCommitRefundsItsToken(t *testing.T) {
	var fail atomic.Bool
	faults := &store.Faults{BeforeCommit: func() error {
		if fail.Load() {
			return errors.New("injected write failure")
		}
		return nil
	}}
	inst := start(t, func(c *config.Config) {
		src := penSource("s")
		src.OnVerifyFailure = config.OnVerifyAcceptFlag
		c.Sources["flag"] = src
		c.Quarantine.Burst, c.Quarantine.Rate = 1, 0.001
		c.Store.ReopenMinMS = 50 // recover fast once the fault is lifted
	}, faults)
	fail.Store(true)
	forge(t, inst, "flag", 10).expect(t, 503, "store_unavailable")
	fail.Store(false)
	poll.Eventually(t, 20*time.Second, func() error {
		if r := forge(t, inst, "flag", 10); r.status != 201 {
			return fmt.Errorf("flagged hook after the fault: %d %s", r.status, r.raw)
		}
		return nil
	})
	forge(t, inst, "flag", 10).expect(t, 429, "quarantine_rate_limited")
}

// Issue 8 item 6: "the dedupe index quota can be filled with unique keys for 72 h". One source holds at most
// dedupe.max_entries_per_source keys: past it 503 dedupe_quota, while another source of the tenant gets 201.
func TestDedupeSourceShare(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		c.Sources["gh-a"], c.Sources["gh-b"] = dedupeSource(), dedupeSource()
		c.Dedupe.MaxEntriesPerSource = 2
	}, nil)
	post := func(source, key string) reply {
		return postBody(t, inst, "/webhooks/"+source, []byte(`{}`), "X-GitHub-Delivery", key)
	}
	post("gh-a", "k-1").expect(t, 201, "")
	post("gh-a", "k-2").expect(t, 201, "")
	r := post("gh-a", "k-3")
	r.expect(t, 503, "dedupe_quota")
	if r.retryAfter != "60" {
		t.Fatalf("Retry-After %q", r.retryAfter)
	}
	post("gh-b", "k-3").expect(t, 201, "")
	if dup := post("gh-a", "k-1"); dup.status != 201 || dup.body["duplicate"] != true {
		t.Fatalf("a duplicate of a held key must still answer: %s", dup.raw)
	}
	if n := quotaRefused(inst, "gh-a", "dedupe_source"); n != 1 {
		t.Fatalf("gh-a's refusals counted %v, want 1", n)
	}
}

// Issue 8 item 6: "rate_limits.source_bytes must charge the bytes actually read (chunked bodies are charged
// today nowhere)". A chunked body has no Content-Length to charge before the read; it is charged after.
func TestChunkedBodyIsChargedToSourceBytes(t *testing.T) {
	inst := start(t, func(c *config.Config) {
		c.RateLimits.SourceBytes = &config.Rate{Rate: 1, Burst: 4096}
	}, nil)
	chunked := func() reply {
		body := strings.Repeat("c", 3000)
		req := "POST /webhooks/sample HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
		return raw(t, inst.IngestAddr(), req, false)
	}
	chunked().expect(t, 201, "")
	chunked().expect(t, 429, "source_rate_limited")
	if n := len(hooks(t, inst)); n != 1 {
		t.Fatalf("%d hooks stored, want 1", n)
	}
}
