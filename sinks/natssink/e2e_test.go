package natssink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/test/services"
)

// Design §6: "A sink's nil means the destination confirmed: ... JetStream ack". An instance whose source
// names a nats sink answers 201 and a JetStream consumer gets the hook as Message v1 that decodes to the
// acked id with the body byte-exact. With the stream deleted a hook still answers 201, every attempt fails
// as no_stream and dispatch retries it; once the stream exists again the hook arrives: nothing is lost.
func TestInstanceDeliversToJetStreamAndRetriesUntilStreamExists(t *testing.T) {
	services.Require(t, "NATS", services.NATSAddr)
	nc, err := nats.Connect("nats://" + services.NATSAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := strings.ReplaceAll(uuid.NewString(), "-", "")
	cfg := jetstream.StreamConfig{Name: "ANKUSA_E2E_" + u, Subjects: []string{"ankusa.e2e." + u}, Storage: jetstream.MemoryStorage}
	create := func() jetstream.Consumer {
		t.Helper()
		st, err := js.CreateStream(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	cons := create()
	defer func() { _ = js.DeleteStream(context.Background(), cfg.Name) }()

	inst := fixture.InstanceWith(t, "nats-e2e", func(c *config.Config) {
		c.Admin.Enabled = false
		c.Dispatch.Retry = config.Retry{BaseMS: 50, MaxMS: 300, MaxAttempts: 1000}
		c.Dispatch.AttemptTimeoutMS = 3000
		c.Dispatch.BreakerFailures = 0
		c.Sources = map[string]config.Source{"gh": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "nats", Options: map[string]any{
			"servers": []any{"nats://" + services.NATSAddr}, "subject": cfg.Subjects[0],
		}}}}}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})

	arrives := func(cons jetstream.Consumer, id string, body []byte) {
		t.Helper()
		msg, err := cons.Next(jetstream.FetchMaxWait(20 * time.Second))
		if err != nil {
			t.Fatalf("hook %s never reached the consumer: %v", id, err)
		}
		m, err := message.Decode(msg.Data())
		if err != nil {
			t.Fatalf("the consumer cannot decode the message: %v", err)
		}
		if m.ID != id || m.SourceID != "gh" || m.TenantID != "acme" || m.Instance != "nats-e2e" || !bytes.Equal(m.Body(), body) {
			t.Fatalf("message %+v (body %q), want hook %s with body %q", m, m.Body(), id, body)
		}
		if got := msg.Headers().Get(jetstream.MsgIDHeader); got != id {
			t.Fatalf("Nats-Msg-Id = %q, want %s", got, id)
		}
		names := make([]string, 0, len(m.Headers))
		for _, h := range m.Headers {
			names = append(names, h.Name)
		}
		if got := strings.Join(names, ","); !strings.Contains(got, "x-github-event") || strings.Contains(got, "authorization") {
			t.Fatalf("forwarded headers %q: want x-github-event, never authorization", got)
		}
	}

	body := []byte("{ \"event\":\t\"push\", \"name\":\"Zo\u00eb\" }\n")
	arrives(cons, post(t, inst, body), body)

	if err := js.DeleteStream(ctx, cfg.Name); err != nil {
		t.Fatal(err)
	}
	during := []byte(`{"while":"no stream is bound"}`)
	id := post(t, inst, during)
	// Dispatch retries: two no_stream attempts at least before the stream exists again.
	retried := inst.Telemetry().Metrics.Dispatch.Deliveries.WithLabelValues(telemetry.ResultRetry, "nats")
	poll.True(t, 20*time.Second, "two no_stream attempts retried", func() bool { return testutil.ToFloat64(retried) >= 2 })
	arrives(create(), id, during)
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
