package test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/services"
)

// brokerBody is a hook body whose bytes a re-encoding would change: odd spacing, a raw tab, a non-ASCII
// rune and an escaped one.
var brokerBody = []byte("{ \"event\":\t\"push\" ,\"name\":\"Zoë\", \"s\":\"\\u00e9\" }\n")

// startBrokerInstance runs an instance whose source "gh" (tenant acme) delivers to sink.
func startBrokerInstance(t *testing.T, sink config.SinkSpec) *instance.Instance {
	t.Helper()
	return fixture.Instance(t, "broker", func(c *config.Config) {
		c.Sources = map[string]config.Source{"gh": {Tenant: "acme", Sinks: []config.SinkSpec{sink}}}
	}, nil)
}

// postHook sends brokerBody with a provider header and a credential and returns the acked id.
func postHook(t *testing.T, inst *instance.Instance) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ingestURL(inst, "/webhooks/gh"), bytes.NewReader(brokerBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("Authorization", "Bearer must-not-travel")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST answered %d: %s", resp.StatusCode, buf.Bytes())
	}
	return decodeAck(t, buf.Bytes()).ID
}

// checkMessage decodes what the broker delivered and compares it with the hook that was acked.
func checkMessage(t *testing.T, raw []byte, id string) *message.Message {
	t.Helper()
	m, err := message.Decode(raw)
	if err != nil {
		t.Fatalf("the consumer cannot decode the message: %v\n%s", err, raw)
	}
	if m.ID != id || m.SourceID != "gh" || m.TenantID != "acme" || m.Instance != "broker" || m.ContentType != "application/json" {
		t.Fatalf("message fields: %+v (acked id %s)", m, id)
	}
	if !bytes.Equal(m.Body(), brokerBody) {
		t.Fatalf("body not byte-exact: %q, sent %q", m.Body(), brokerBody)
	}
	var forwarded []string
	for _, h := range m.Headers {
		forwarded = append(forwarded, h.Name)
	}
	if got := strings.Join(forwarded, ","); !strings.Contains(got, "x-github-event") || strings.Contains(got, "authorization") {
		t.Fatalf("forwarded headers %q: want x-github-event, never authorization", got)
	}
	return m
}

// Inventory D.2 nats ("JetStream pub ack") and D.4: a hook acked 201 reaches a real JetStream consumer as
// a Message v1 that decodes to the same id and the byte-exact body.
func TestHookReachesJetStreamConsumer(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := strings.ReplaceAll(uuid.NewString(), "-", "")
	name, subject := "ANKUSA_E2E_"+u, "ankusa.e2e."+u
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), name) }()
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}

	inst := startBrokerInstance(t, config.SinkSpec{Type: "nats", Options: map[string]any{
		"servers": []any{"nats://" + services.NATSAddr}, "subject": subject}})
	id := postHook(t, inst)

	msg, err := cons.Next(jetstream.FetchMaxWait(20 * time.Second))
	if err != nil {
		t.Fatalf("no message reached the consumer: %v", err)
	}
	checkMessage(t, msg.Data(), id)
	if got := msg.Headers().Get(jetstream.MsgIDHeader); got != id {
		t.Fatalf("Nats-Msg-Id = %q, want %s", got, id)
	}
	if got := msg.Headers().Get(message.AttrIdempotencyKey); got != id {
		t.Fatalf("%s = %q, want the hook id (no dedupe key)", message.AttrIdempotencyKey, got)
	}
}

// Inventory D.2 redis ("PUBLISH reached ≥1 subscriber"): a hook acked 201 reaches a real subscriber as a
// Message v1 that decodes to the same id and the byte-exact body.
func TestHookReachesRedisSubscriber(t *testing.T) {
	services.Require(t, "Redis", services.RedisAddr)
	c := redis.NewClient(&redis.Options{Addr: services.RedisAddr, DisableIdentity: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	channel := "ankusa-e2e-" + uuid.NewString()
	sub := c.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription is in place before the hook is sent
		t.Fatal(err)
	}

	inst := startBrokerInstance(t, config.SinkSpec{Type: "redis", Options: map[string]any{
		"url": "redis://" + services.RedisAddr, "channel": channel}})
	id := postHook(t, inst)

	m, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("no message reached the subscriber: %v", err)
	}
	checkMessage(t, []byte(m.Payload), id)
}
