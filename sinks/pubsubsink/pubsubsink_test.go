package pubsubsink

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/leak"
)

// The OpenCensus worker the client links in is ignored by test/leak itself.
func TestMain(m *testing.M) { leak.VerifyTestMain(m) }

const project = "ankusa-test"

// fake is one pstest server with an admin client on it: topics and subscriptions are made here, never by
// the sink.
type fake struct {
	srv    *pstest.Server
	client *pubsub.Client
}

func newFake(t testing.TB, opts ...pstest.ServerReactorOption) *fake {
	t.Helper()
	srv := pstest.NewServer(opts...)
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	client, err := pubsub.NewClient(context.Background(), project, option.WithGRPCConn(conn), option.WithTelemetryDisabled())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.Close()
		_ = conn.Close()
		_ = srv.Close()
	})
	return &fake{srv: srv, client: client}
}

// topic creates topic id and a subscription on it; it returns the topic's full name and the
// subscription's.
func (f *fake) topic(t testing.TB, id string) (string, string) {
	t.Helper()
	name := "projects/" + project + "/topics/" + id
	if _, err := f.client.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: name}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	sub := "projects/" + project + "/subscriptions/" + id + "-sub"
	if _, err := f.client.SubscriptionAdminClient.CreateSubscription(context.Background(), &pubsubpb.Subscription{Name: sub, Topic: name}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	return name, sub
}

func (f *fake) sink(t testing.TB, opts map[string]any) sinks.Sink {
	t.Helper()
	opts["endpoint"] = f.srv.Addr
	opts["auth"] = "none"
	if _, ok := opts["project"]; !ok {
		opts["project"] = project
	}
	return sinktest.NewSink(t, New, Type, opts)
}

// target runs the conformance suite against pstest. Received reads what the server accepted (srv.Messages,
// no streaming pull held open) and decodes each Message v1 once.
type target struct {
	f     *fake
	topic string
	seen  map[string]bool // server message ids filed
	filed sinktest.Filed
}

func (tg *target) New(t *testing.T) sinks.Sink {
	// The suite sends bodies up to 256 KiB without a claim: inline_max_bytes is raised to let them through.
	return tg.f.sink(t, map[string]any{"topic": tg.topic, "inline_max_bytes": 300_000})
}

func (tg *target) Received(t *testing.T, id string) ([][]byte, bool) {
	for _, m := range tg.f.srv.Messages() {
		if tg.seen[m.ID] {
			continue
		}
		tg.seen[m.ID] = true
		tg.filed.Add(t, m.Data)
	}
	return tg.filed.Received(id)
}

func (tg *target) Broken(t *testing.T) sinks.Sink {
	// A topic nobody created: the sink never creates one, and the hook must be retried.
	s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{
		"project": project, "topic": "never-created", "endpoint": tg.f.srv.Addr, "auth": "none",
	}}, sinks.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	f := newFake(t)
	name, _ := f.topic(t, "conformance")
	sinktest.Run(t, &target{f: f, topic: name, seen: make(map[string]bool)})
}

// Inventory D.4: the queue sinks publish Message v1 with the broker attribute set; a subscriber decodes the
// byte-exact body.
func TestSubscriberReceivesMessageV1WithAttributes(t *testing.T) {
	f := newFake(t)
	_, sub := f.topic(t, "message")
	s := f.sink(t, map[string]any{"topic": "message", "ordering_key": "acme-orders"})
	body := sinktest.Binary(4096)
	e := sinktest.Envelope(body)
	e.ReplayID = "r1"
	if err := sinktest.Deliver(s, e, 10*time.Second); err != nil {
		t.Fatalf("Deliver = %v", err)
	}

	// A unary Pull, as a consumer batch job would: a streaming Receive leaves the client's keep-alive
	// goroutine running for seconds after it returns.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := f.client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 10})
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	got := resp.GetReceivedMessages()
	if len(got) != 1 {
		t.Fatalf("subscriber got %d messages, want 1", len(got))
	}
	if err := f.client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: []string{got[0].GetAckId()}}); err != nil {
		t.Fatalf("Acknowledge: %v", err)
	}
	m := got[0].GetMessage()
	if want := message.Encode(nil, e, message.Meta{Instance: "n1"}); !bytes.Equal(m.Data, want) {
		t.Fatalf("message data is not message.Encode of the envelope:\n got %.200s\nwant %.200s", m.Data, want)
	}
	dec, err := message.Decode(m.Data)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !bytes.Equal(dec.Body(), body) || dec.ID != e.IDText || dec.ReplayID != "r1" {
		t.Fatalf("decoded id %s replay %q, body equal %v", dec.ID, dec.ReplayID, bytes.Equal(dec.Body(), body))
	}
	if m.OrderingKey != "acme-orders" {
		t.Fatalf("ordering key %q, want acme-orders", m.OrderingKey)
	}
	want := message.Attributes(e)
	if len(m.Attributes) != len(want) {
		t.Fatalf("got %d attributes, want %d (%v)", len(m.Attributes), len(want), m.Attributes)
	}
	for _, a := range want {
		if m.Attributes[a.Name] != a.Value {
			t.Fatalf("attribute %s = %q, want %q", a.Name, m.Attributes[a.Name], a.Value)
		}
	}
}

// Inventory D.2 "Permanent failures: oversize"; the service's InvalidArgument is Permanent too.
func TestOversizeIsPermanent(t *testing.T) {
	f := newFake(t)
	f.topic(t, "oversize")
	s := f.sink(t, map[string]any{"topic": "oversize", "max_message_bytes": 2048})
	err := sinktest.Deliver(s, sinktest.Envelope(sinktest.Binary(1600)), 10*time.Second)
	if cl, _ := sinks.Classify(err); !errors.Is(err, ErrTooLarge) || cl != sinks.PermanentClass {
		t.Fatalf("a message over max_message_bytes: %v (%s), want permanent ErrTooLarge", err, cl)
	}
	if n := len(f.srv.Messages()); n != 0 {
		t.Fatalf("the server holds %d messages, want none", n)
	}
	if err := sinktest.Deliver(s, sinktest.Envelope(sinktest.Binary(100)), 10*time.Second); err != nil {
		t.Fatalf("a message under the limit: %v", err)
	}
}

// sinks.InlineLimiter: a body over inline_max_bytes travels by claim; without one the sink refuses it.
func TestBodyOverInlineMaxTravelsByClaim(t *testing.T) {
	f := newFake(t)
	f.topic(t, "claim")
	s := f.sink(t, map[string]any{"topic": "claim", "inline_max_bytes": 16})
	sinktest.InlineLimit(t, s, ErrNeedsClaim, func(id string) [][]byte {
		var held [][]byte
		for _, m := range f.srv.Messages() {
			held = append(held, m.Data)
		}
		return sinktest.OfHook(t, id, held)
	})
}

// Package doc: InvalidArgument is Permanent; NotFound (a missing topic), PermissionDenied and the like are
// Transient.
func TestServiceErrorClasses(t *testing.T) {
	f := func(code codes.Code, want sinks.Class) {
		t.Helper()
		fk := newFake(t, pstest.WithErrorInjection("Publish", code, "injected"))
		fk.topic(t, "errors")
		s := fk.sink(t, map[string]any{"topic": "errors", "timeout_ms": 1500})
		err := sinktest.Deliver(s, sinktest.Envelope([]byte("x")), 10*time.Second)
		if cl, _ := sinks.Classify(err); err == nil || cl != want {
			t.Fatalf("%s: %v classified %s, want %s", code, err, cl, want)
		}
	}
	f(codes.InvalidArgument, sinks.PermanentClass)
	f(codes.PermissionDenied, sinks.Transient)
	f(codes.NotFound, sinks.Transient)
}

// The client is built on the first Deliver, so an unreachable destination or missing credentials cost an
// attempt (Transient), never the sink's construction (check-config builds every sink).
func TestNewDoesNotConnect(t *testing.T) {
	s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{
		"project": project, "topic": "t", "auth": "token", "token": "ya29.secret-token",
	}}, sinks.Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_ = s.Close()
	if err := s.Deliver(context.Background(), sinktest.Envelope([]byte("x"))); !errors.Is(err, sinks.ErrClosed) {
		t.Fatalf("Deliver after Close = %v, want ErrClosed", err)
	}
}

func TestOptions(t *testing.T) {
	f := func(opts map[string]any, want ...string) {
		t.Helper()
		sinktest.RefusesOptions(t, New, Type, opts, want...)
	}
	f(map[string]any{}, "google_pubsub sink: topic: is required")
	f(map[string]any{"topic": "t"}, "project: is required unless topic is projects/<project>/topics/<topic>")
	f(map[string]any{"topic": "a/b"}, "topic: must be a topic id or projects/<project>/topics/<topic>")
	f(map[string]any{"topic": "projects/p/topics/t", "project": "q"}, "project: differs")
	f(map[string]any{"topic": "t", "project": "p", "auth": "token"}, "token: is required with auth: token")
	f(map[string]any{"topic": "t", "project": "p", "token": sinktest.Secret}, "token: applies to auth: token only")
	f(map[string]any{"topic": "t", "project": "p", "auth": "none"}, "endpoint: is required with auth: none")
	f(map[string]any{"topic": "t", "project": "p", "auth": "basic"}, "auth: must be one of metadata|token|none")
	f(map[string]any{"topic": "t", "project": "p", "endpoint": "http://x"}, "endpoint: must be host:port")
	f(map[string]any{"topic": "t", "project": "p", "max_message_bytes": 20_000_000}, "max_message_bytes: must be in 1024..10000000")
	f(map[string]any{"topic": "t", "project": "p", "subscription": "s"}, "subscription: unknown option")
	// Accepted: NewSink fails the test on an error.
	sinktest.NewSink(t, New, Type, map[string]any{"topic": "projects/p/topics/t"})
	sinktest.NewSink(t, New, Type, map[string]any{"topic": "t", "project": "p", "auth": "token", "token": sinktest.Secret, "ordering_key": "k", "timeout_ms": 100})
}

// Options carry secrets (STYLE: "secrets are never logged or printed"): a failed attempt under auth token
// names the topic, never the token. pstest speaks plaintext, so the TLS connection a token needs fails.
func TestTokenNeverInErrors(t *testing.T) {
	f := newFake(t)
	f.topic(t, "secret")
	s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{
		"project": project, "topic": "secret", "endpoint": f.srv.Addr, "auth": "token", "token": "ya29.s3cr3t-token", "timeout_ms": 500,
	}}, sinks.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = sinktest.Deliver(s, sinktest.Envelope([]byte("x")), 10*time.Second)
	if cl, _ := sinks.Classify(err); err == nil || cl == sinks.PermanentClass {
		t.Fatalf("TLS to a plaintext server: %v (%s), want a retried failure", err, cl)
	}
	if strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "projects/"+project+"/topics/secret") {
		t.Fatalf("error %q: must name the topic and never the token", err)
	}
	if n := len(f.srv.Messages()); n != 0 {
		t.Fatalf("server holds %d messages", n)
	}
}
