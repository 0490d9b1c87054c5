package admin

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sources"
)

// Two sources on one Kafka topic share its channel (a message each, both in its send operation); a Pub/Sub topic
// id is addressed by its full name; a lifecycle routing key naming {tenant} keeps it as a channel parameter
// (the tenant is each event's); the document does not depend on the order the sources come in.
func TestAsyncAPIChannelPerDestination(t *testing.T) {
	kafka := config.SinkSpec{Type: "kafka", Options: map[string]any{"brokers": []any{"k1:9092", "k2:9092"}, "topic": "shared"}}
	srcs := []sources.Entry{
		{Tenant: "acme", Name: "a", Source: config.Source{Sinks: []config.SinkSpec{kafka}}},
		{Tenant: "beta", Name: "b", Source: config.Source{Sinks: []config.SinkSpec{kafka,
			{Type: "google_pubsub", Options: map[string]any{"project": "p", "topic": "t"}}}}},
	}
	cfg := &config.Config{Instance: "n1", Lifecycle: config.Lifecycle{Sinks: []config.SinkSpec{{Type: "rabbitmq",
		Options: map[string]any{"url": "amqps://u:pw@mq:5671/", "exchange": "ops", "routing_key": "{tenant}.changes"}}}}}
	doc := buildAsyncAPI(cfg, "", srcs, true)
	byAddr := map[string]asyncChannel{}
	for _, ch := range doc.Channels {
		byAddr[ch.Address] = ch
	}
	if len(byAddr) != 3 || len(doc.Channels) != 3 {
		t.Fatalf("channels %v", doc.Channels)
	}
	shared := byAddr["shared"]
	if len(shared.Messages) != 2 || shared.Messages["a"].Ref != "#/components/messages/queue.a" ||
		shared.Messages["b"].Ref != "#/components/messages/queue.b" || len(shared.Servers) != 2 {
		t.Fatalf("shared topic: %+v", shared)
	}
	if op := doc.Operations["send-kafka-shared"]; op.Action != "send" || len(op.Messages) != 2 {
		t.Fatalf("operations %v", doc.Operations)
	}
	if _, ok := byAddr["projects/p/topics/t"]; !ok {
		t.Fatalf("pubsub address: %v", doc.Channels)
	}
	lc, ok := byAddr["ops/{tenant}.changes"]
	if _, param := lc.Parameters["tenant"]; !ok || !param || lc.Messages[lifecyclePublisher].Ref == "" {
		t.Fatalf("lifecycle channel: %+v", lc)
	}
	if s := doc.Servers["amqps-mq_5671"]; s.Protocol != "amqps" || s.Host != "mq:5671" {
		t.Fatalf("servers %v", doc.Servers)
	}
	one, _ := json.Marshal(doc)
	rev := slices.Clone(srcs)
	slices.Reverse(rev)
	two, _ := json.Marshal(buildAsyncAPI(cfg, "", rev, true))
	if string(one) != string(two) {
		t.Fatal("the document depends on the order of the sources")
	}
	// Without lifecycle (a tenant-scoped principal) the lifecycle channel is gone.
	if d := buildAsyncAPI(cfg, "", srcs, false); len(d.Channels) != 2 {
		t.Fatalf("without lifecycle: %v", d.Channels)
	}
}
