package claimcheck_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/services"
)

const e2eToken = "acme-e2e-reader-0123456789"

// Inventory D.5 end to end: a body over the sink's inline_max_bytes is checked in before the sink runs and the
// queue message carries the claim instead of the body; a consumer redeems it from the instance's claim gateway
// (message.Redeem checks size and sha256) and gets the posted bytes. A body under the limit stays inline. The
// sink is Redis (on this machine) with inline_max_bytes 64.
func TestQueueSinkCarriesAClaimARedeemerCanRead(t *testing.T) {
	services.Require(t, "Redis", services.RedisAddr)
	rc := redis.NewClient(&redis.Options{Addr: services.RedisAddr, DisableIdentity: true})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	channel := "ankusa-claims-" + uuid.NewString()
	sub := rc.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatal(err)
	}

	inst := fixture.StartSink(t, "claims-e2e", config.SinkSpec{Type: "redis", Options: map[string]any{
		"url": "redis://" + services.RedisAddr, "channel": channel, "inline_max_bytes": 64,
	}}, func(cfg *config.Config) {
		cfg.Node.Roles = []string{config.RoleEdge, config.RoleDispatch, config.RoleClaimCheck}
		cfg.ClaimCheck.Auth.Tokens = []config.ClaimToken{{Token: e2eToken, Scopes: []string{config.ScopeClaimsRead}, Tenants: []string{"acme"}}}
	})

	large := make([]byte, 300_000)
	if _, err := rand.Read(large); err != nil {
		t.Fatal(err)
	}
	small := []byte(`{"small":true}`)
	for _, body := range [][]byte{large, small} {
		id := inst.Post(t, body, octetStream())
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		raw, err := sub.ReceiveMessage(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("hook %s never reached the subscriber: %v", id, err)
		}
		if len(raw.Payload) > 4096 {
			t.Fatalf("the message for a %d-byte body is %d bytes: the body travelled inline", len(body), len(raw.Payload))
		}
		m, err := message.Decode([]byte(raw.Payload))
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != id || m.Size != int64(len(body)) {
			t.Fatalf("message for hook %s: id %s, size %d", id, m.ID, m.Size)
		}
		if (len(body) > 64) != (m.Claim != "") {
			t.Fatalf("%d-byte body: claim %q (inline_max_bytes 64)", len(body), m.Claim)
		}
		if m.Claim != "" && !strings.HasPrefix(m.Claim, "urn:ankusa:claim:v1:acme:") {
			t.Fatalf("claim ref %q", m.Claim)
		}
		got, err := message.Redeem(ctx, nil, "http://"+inst.ClaimCheckAddr(), e2eToken, m)
		if err != nil {
			t.Fatalf("Redeem: %v", err)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("redeemed %d bytes differ from the %d posted", len(got), len(body))
		}
	}
}

// post sends body to source gh and returns the acked id.
func post(t *testing.T, addr string, body []byte) string {
	t.Helper()
	return fixture.Post(t, addr, "gh", body, octetStream())
}

func octetStream() http.Header { return http.Header{"Content-Type": {"application/octet-stream"}} }
