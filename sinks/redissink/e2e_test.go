package redissink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/test/services"
)

// Inventory D.2 redis: ":ok means PUBLISH reached ≥1 subscriber; no_subscribers is an error". A hook posted
// while nobody subscribes answers 201 (the store has it), every attempt fails as no_subscribers and dispatch
// retries it; once a subscriber listens the hook reaches it as Message v1 that decodes to the acked id with
// the body byte-exact, and so does the next hook.
func TestInstanceDeliversToRedisOnceSubscribed(t *testing.T) {
	services.Require(t, "Redis", services.RedisAddr)
	c := redis.NewClient(&redis.Options{Addr: services.RedisAddr, DisableIdentity: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	channel := "ankusa-e2e-" + uuid.NewString()

	inst := fixture.InstanceWith(t, "redis-e2e", func(cfg *config.Config) {
		cfg.Admin.Enabled = false
		cfg.Dispatch.Retry = config.Retry{BaseMS: 50, MaxMS: 300, MaxAttempts: 1000}
		cfg.Dispatch.AttemptTimeoutMS = 3000
		cfg.Dispatch.BreakerFailures = 0
		cfg.Sources = map[string]config.Source{"gh": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "redis", Options: map[string]any{
			"url": "redis://" + services.RedisAddr, "channel": channel,
		}}}}}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})

	early := []byte(`{"while":"nobody listens"}`)
	earlyID := post(t, inst, early)
	retried := inst.Telemetry().Metrics.Dispatch.Deliveries.WithLabelValues(telemetry.ResultRetry, "redis")
	poll.True(t, 20*time.Second, "two no_subscribers attempts retried", func() bool { return testutil.ToFloat64(retried) >= 2 })

	sub := c.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	arrives := func(id string, body []byte) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		raw, err := sub.ReceiveMessage(rctx)
		if err != nil {
			t.Fatalf("hook %s never reached the subscriber: %v", id, err)
		}
		m, err := message.Decode([]byte(raw.Payload))
		if err != nil {
			t.Fatalf("the subscriber cannot decode the message: %v", err)
		}
		if m.ID != id || m.SourceID != "gh" || m.TenantID != "acme" || m.Instance != "redis-e2e" || !bytes.Equal(m.Body(), body) {
			t.Fatalf("message %+v (body %q), want hook %s with body %q", m, m.Body(), id, body)
		}
		names := make([]string, 0, len(m.Headers))
		for _, h := range m.Headers {
			names = append(names, h.Name)
		}
		if got := strings.Join(names, ","); !strings.Contains(got, "x-github-event") || strings.Contains(got, "authorization") {
			t.Fatalf("forwarded headers %q: want x-github-event, never authorization", got)
		}
	}
	arrives(earlyID, early)
	body := []byte("{ \"event\":\t\"push\", \"name\":\"Zo\u00eb\" }\n")
	arrives(post(t, inst, body), body)
}

// post sends body to source gh with a provider header and a credential, and returns the acked id.
func post(t *testing.T, inst *instance.Instance, body []byte) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+inst.IngestAddr()+"/webhooks/gh", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("Authorization", "Bearer must-not-travel")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ack struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&ack)
	if resp.StatusCode != http.StatusCreated || ack.ID == "" {
		t.Fatalf("POST answered %d (id %q), want 201", resp.StatusCode, ack.ID)
	}
	return ack.ID
}
