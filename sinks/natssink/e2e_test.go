package natssink_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
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

	inst := fixture.StartSink(t, "nats-e2e", config.SinkSpec{Type: "nats", Options: map[string]any{
		"servers": []any{"nats://" + services.NATSAddr}, "subject": cfg.Subjects[0],
	}}, nil)

	arrives := func(cons jetstream.Consumer, id string, body []byte) {
		t.Helper()
		msg, err := cons.Next(jetstream.FetchMaxWait(fixture.Arrival))
		if err != nil {
			t.Fatalf("hook %s never reached the consumer: %v", id, err)
		}
		fixture.CheckForwarded(t, inst.Received(t, msg.Data(), id, body))
		if got := msg.Headers().Get(jetstream.MsgIDHeader); got != id {
			t.Fatalf("Nats-Msg-Id = %q, want %s", got, id)
		}
	}

	body := []byte("{ \"event\":\t\"push\", \"name\":\"Zo\u00eb\" }\n")
	arrives(cons, inst.Post(t, body, fixture.GitHubPush()), body)

	if err := js.DeleteStream(ctx, cfg.Name); err != nil {
		t.Fatal(err)
	}
	during := []byte(`{"while":"no stream is bound"}`)
	id := inst.Post(t, during, fixture.GitHubPush())
	// Dispatch retries: two no_stream attempts at least before the stream exists again.
	inst.AwaitRetries(t, 2, "two no_stream attempts retried")
	arrives(create(), id, during)
}
