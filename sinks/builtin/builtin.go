package builtin

import (
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/httpsink"
	"github.com/ankusa-go/ankusa/sinks/kafkasink"
	"github.com/ankusa-go/ankusa/sinks/logsink"
	"github.com/ankusa-go/ankusa/sinks/rabbitsink"
	"github.com/ankusa-go/ankusa/sinks/sqssink"
)

// NewRegistry returns a new registry with every shipped sink type registered (log, http, kafka, rabbitmq, sqs).
func NewRegistry() *sinks.Registry {
	r := sinks.NewRegistry()
	logsink.Register(r)
	httpsink.Register(r)
	kafkasink.Register(r)
	rabbitsink.Register(r)
	sqssink.Register(r)
	return r
}
