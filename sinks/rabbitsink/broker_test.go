package rabbitsink

import (
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/services"
)

// broker is the machine's RabbitMQ with one exchange and one queue of the test's own, uniquely named,
// removed when the test ends. The sink never declares anything: the test does, as an operator would.
type broker struct {
	t        testing.TB
	url      string
	conn     *amqp.Connection
	ch       *amqp.Channel
	exchange string
	queue    string
	binding  string

	mu   sync.Mutex
	byID map[string][]amqp.Delivery
}

func newBroker(t testing.TB) *broker {
	t.Helper()
	url := services.RabbitMQ(t)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("cannot connect to RabbitMQ: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	n := uuid.NewString()[:8]
	b := &broker{t: t, url: url, conn: conn, ch: ch, exchange: "ankusa-test-" + n, queue: "ankusa-test-" + n,
		binding: "ankusa.#", byID: map[string][]amqp.Delivery{}}
	if err := ch.ExchangeDeclare(b.exchange, "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	b.declareQueue()
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(b.queue, false, false, false)
		_ = ch.ExchangeDelete(b.exchange, false, false)
		_ = conn.Close()
	})
	return b
}

func (b *broker) declareQueue() {
	b.t.Helper()
	if _, err := b.ch.QueueDeclare(b.queue, false, false, false, false, nil); err != nil {
		b.t.Fatal(err)
	}
	if err := b.ch.QueueBind(b.queue, b.binding, b.exchange, false, nil); err != nil {
		b.t.Fatal(err)
	}
}

func (b *broker) deleteQueue() {
	b.t.Helper()
	if _, err := b.ch.QueueDelete(b.queue, false, false, false); err != nil {
		b.t.Fatal(err)
	}
}

// sink builds a sink to this broker's exchange at url (the broker's, or a proxy's); opts override.
func (b *broker) sink(t testing.TB, url string, opts map[string]any) *sink {
	t.Helper()
	o := map[string]any{"url": url, "exchange": b.exchange, "exchange_type": "topic"}
	maps.Copy(o, opts)
	return sinktest.NewSink(t, New, Type, o).(*sink)
}

// deliveries drains the queue (basic.get until empty) and returns every message of hook id seen so far. A
// confirmed message is in the queue, so no polling is needed.
func (b *broker) deliveries(id string) []amqp.Delivery {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		d, ok, err := b.ch.Get(b.queue, true)
		if err != nil {
			b.t.Fatalf("basic.get on %s: %v", b.queue, err)
		}
		if !ok {
			break
		}
		b.byID[d.MessageId] = append(b.byID[d.MessageId], d)
	}
	return b.byID[id]
}

// payloads returns the bodies of the AMQP messages of hook id (deliveries).
func (b *broker) payloads(id string) [][]byte {
	var out [][]byte
	for _, d := range b.deliveries(id) {
		out = append(out, d.Body)
	}
	return out
}

// bodies decodes the messages of hook id as Message v1 and returns their bodies.
func (b *broker) bodies(id string) ([][]byte, error) { return sinktest.Bodies(b.payloads(id)) }

// urlAt is the broker URL with its address replaced (a proxy's).
func urlAt(addr string) string { return "amqp://guest:guest@" + addr + "/" }

const attempt = 10 * time.Second
