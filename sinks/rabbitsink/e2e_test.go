package rabbitsink_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks/rabbitsink"
	"github.com/ankusa-go/ankusa/test/fixture"
)

// Design §6: "A sink's nil means the destination confirmed: ... RabbitMQ publisher confirm (mandatory)". An
// instance whose source names a rabbitmq sink answers 201 and a consumer of the bound queue gets the hook as
// Message v1, body byte-exact. With the queue gone a hook still answers 201, every attempt is unroutable and
// retried by dispatch; once a queue is bound again the hook arrives: nothing is lost.
func TestInstanceDeliversToRabbitMQAndRetriesUntilRouted(t *testing.T) {
	b := rabbitsink.NewBroker(t)
	inst := fixture.StartSink(t, "rabbit-e2e", config.SinkSpec{Type: "rabbitmq", Options: map[string]any{
		"url": b.URL(), "exchange": b.Exchange(), "exchange_type": "topic",
	}}, nil)

	body := []byte(`{"order":42,"note":"caf\u00e9"}` + "\x00\xff")
	inst.AwaitDelivered(t, inst.Post(t, body, nil), body, b.Payloads)

	b.DeleteQueue()
	during := []byte(`{"order":43,"while":"no queue is bound"}`)
	id := inst.Post(t, during, nil)
	// Dispatch retries: two unroutable attempts at least before a queue is bound again.
	inst.AwaitRetries(t, 2, "two unroutable attempts retried")
	b.DeclareQueue()
	inst.AwaitDelivered(t, id, during, b.Payloads)
}
