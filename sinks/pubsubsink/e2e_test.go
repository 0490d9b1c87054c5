package pubsubsink_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks/pubsubsink"
	"github.com/ankusa-go/ankusa/test/fixture"
)

// Design §6: "A sink's nil means the destination confirmed: ... SQS/PubSub publish result". A running
// instance whose source names a google_pubsub sink answers 201 and the topic then holds the hook as Message
// v1, body byte-exact.
func TestInstanceDeliversToPubSub(t *testing.T) {
	addr, messages := pubsubsink.PstestTopic(t, "e2e")
	inst := fixture.StartSink(t, "pubsub-e2e", config.SinkSpec{Type: "google_pubsub", Options: map[string]any{
		"project": pubsubsink.Project, "topic": "e2e", "endpoint": addr, "auth": "none",
	}}, nil)

	body := []byte("{\"order\":42}\x00\xff")
	inst.AwaitDelivered(t, inst.Post(t, body, nil), body, fixture.ByID(messages))
}
