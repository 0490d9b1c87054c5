package builtin

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// Each call builds a new registry holding the shipped sinks; registering on one leaves the other untouched
// (no package-level mutable state: two instances run in one process).
func TestNewRegistryHoldsShippedSinksPerInstance(t *testing.T) {
	a, b := NewRegistry(), NewRegistry()
	if got := a.Types(); !reflect.DeepEqual(got, []string{"google_pubsub", "http", "kafka", "log", "nats", "rabbitmq", "redis", "sqs"}) {
		t.Fatalf("Types = %v", got)
	}
	a.Register("extra", func(config.SinkSpec, sinks.Deps) (sinks.Sink, error) { return nil, errors.New("x") })
	if got := b.Types(); !reflect.DeepEqual(got, []string{"google_pubsub", "http", "kafka", "log", "nats", "rabbitmq", "redis", "sqs"}) {
		t.Fatalf("a Register leaked into another registry: %v", got)
	}
	deps := sinks.Deps{Instance: "n1", Log: zerolog.Nop()}
	for _, spec := range []config.SinkSpec{{Type: "log"}, {Type: "http", Options: map[string]any{"url": "https://example.com/h"}},
		// Building a broker sink does not reach its broker (check-config builds every sink).
		{Type: "kafka", Options: map[string]any{"brokers": []any{"127.0.0.1:1"}, "topic": "hooks"}},
		{Type: "nats", Options: map[string]any{"servers": []any{"127.0.0.1:1"}, "subject": "hooks"}},
		{Type: "rabbitmq", Options: map[string]any{"url": "amqp://127.0.0.1:1/", "exchange": "hooks"}},
		{Type: "redis", Options: map[string]any{"url": "redis://127.0.0.1:1", "channel": "hooks"}},
		{Type: "sqs", Options: map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/hooks"}}} {
		s, err := b.New(spec, deps)
		if err != nil {
			t.Fatalf("New(%s): %v", spec.Type, err)
		}
		if s.Durable() != spec.Durable() {
			t.Fatalf("%s: Durable() = %v, config says %v", spec.Type, s.Durable(), spec.Durable())
		}
		_ = s.Close()
	}
	_, err := b.New(config.SinkSpec{Type: "http", Options: map[string]any{"url": "nope"}}, deps)
	if !errors.Is(err, sinks.ErrInvalidOption) || !strings.Contains(err.Error(), "http sink: url: must be an absolute http(s) URL") {
		t.Fatalf("bad url: %v", err)
	}
	if _, err := b.New(config.SinkSpec{Type: "smtp"}, deps); !errors.Is(err, sinks.ErrUnknownType) {
		t.Fatalf("a type no package registers: %v", err)
	}
}
