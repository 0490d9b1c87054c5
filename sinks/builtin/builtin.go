package builtin

import (
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/httpsink"
	"github.com/ankusa-go/ankusa/sinks/kafkasink"
	"github.com/ankusa-go/ankusa/sinks/logsink"
	"github.com/ankusa-go/ankusa/sinks/natssink"
	"github.com/ankusa-go/ankusa/sinks/pubsubsink"
	"github.com/ankusa-go/ankusa/sinks/rabbitsink"
	"github.com/ankusa-go/ankusa/sinks/redissink"
	"github.com/ankusa-go/ankusa/sinks/sqssink"
)

// NewRegistry returns a new registry with every shipped sink type registered (log, http, kafka, nats,
// rabbitmq, redis, sqs, google_pubsub).
func NewRegistry() *sinks.Registry {
	r := sinks.NewRegistry()
	logsink.Register(r)
	httpsink.Register(r)
	kafkasink.Register(r)
	natssink.Register(r)
	rabbitsink.Register(r)
	redissink.Register(r)
	sqssink.Register(r)
	pubsubsink.Register(r)
	return r
}
