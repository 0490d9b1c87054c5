package kafkasink_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks/kafkasink"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Design §6: "A sink's nil means the destination confirmed: ... Kafka acks=all". An instance whose source
// names a kafka sink answers 201, and a consumer then reads the hook as Message v1 with the body byte-exact.
// While every produce is refused (NOT_ENOUGH_REPLICAS) a hook still answers 201 and dispatch retries it;
// once the partition accepts again it arrives: nothing acknowledged to the sender is lost.
func TestInstanceDeliversToKafkaAndRetriesThroughAnOutage(t *testing.T) {
	c := kafkasink.NewCluster(t)
	cons := kafkasink.NewConsumer(t, c.ListenAddrs(), kafkasink.TestTopic)
	brokers := make([]any, 0, 3)
	for _, a := range c.ListenAddrs() {
		brokers = append(brokers, a)
	}
	inst := fixture.StartSink(t, "kafka-e2e", config.SinkSpec{Type: "kafka", Options: map[string]any{
		"brokers": brokers, "topic": kafkasink.TestTopic, "produce_timeout_ms": 1000,
	}}, nil)

	body := []byte(`{"order":42,"note":"caf\u00e9"}` + "\x00\xff")
	inst.AwaitDelivered(t, inst.Post(t, body, nil), body, cons.Payloads)

	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kafkasink.TestTopic, Err: kerr.NotEnoughReplicas, Count: -1})
	during := []byte(`{"order":43,"during":"outage"}`)
	id := inst.Post(t, during, nil)
	// Two refused produce requests at least: the first attempt and a retry by dispatch.
	poll.True(t, fixture.Arrival, "produce requests refused during the outage", func() bool { return h.Hits() >= 2 })
	if got, _ := cons.Payloads(id); len(got) != 0 {
		t.Fatalf("hook %s is in the topic while every produce is refused", id)
	}
	h.Remove()
	inst.AwaitDelivered(t, id, during, cons.Payloads)
}
