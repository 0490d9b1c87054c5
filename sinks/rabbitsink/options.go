package rabbitsink

import (
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// Type is the YAML `type` of this sink.
const Type = "rabbitmq"

// Defaults (inventory D.2).
const (
	DefaultRoutingKey     = "ankusa.{source_id}"
	DefaultInlineMaxBytes = 65536
	DefaultMaxInflight    = 256
	DefaultConfirmTimeout = 5 * time.Second
	DefaultRetry          = 5 * time.Second
)

// exchangeTypes are the exchange kinds the option may name. The sink declares nothing: the type only
// documents (and validates) what the operator declared.
var exchangeTypes = []string{"topic", "direct", "fanout", "headers"}

type settings struct {
	url            string
	target         string // the URL as errors and logs show it (config.RedactURL: no credentials)
	exchange       string
	exchangeType   string
	routingKey     sinks.Template
	inlineMax      int
	maxInflight    int
	confirmTimeout time.Duration
	retry          time.Duration
}

// parse validates spec's options; every problem is a *sinks.OptionError naming the option, never its value.
func parse(spec config.SinkSpec) (settings, error) {
	o := sinks.NewOptions(Type, spec.Options)
	var s settings
	if s.url = o.RequiredString("url"); s.url != "" {
		if _, err := amqp.ParseURI(s.url); err != nil {
			o.Fail("url", "must be an amqp:// or amqps:// URL")
		}
		s.target = config.RedactURL(s.url, false)
	}
	// The default exchange ("") is a valid target (routing key = queue name), so exchange must be present
	// but may be empty.
	if !o.Has("exchange") {
		o.Fail("exchange", "is required (\"\" names the default exchange)")
	}
	s.exchange = o.String("exchange", "")
	if len(s.exchange) > 255 {
		o.Fail("exchange", "must be at most 255 bytes")
	}
	s.exchangeType = o.String("exchange_type", "topic")
	known := false
	for _, k := range exchangeTypes {
		known = known || k == s.exchangeType
	}
	if !known {
		o.Fail("exchange_type", "must be one of "+strings.Join(exchangeTypes, "|"))
	}
	var ok bool
	if s.routingKey, ok = sinks.ParseTemplate(o.String("routing_key", DefaultRoutingKey)); !ok {
		o.Fail("routing_key", "placeholders are {"+strings.Join(sinks.TemplateFields, "}, {")+"}; braces must pair")
	}
	s.inlineMax = o.Int("inline_max_bytes", DefaultInlineMaxBytes, 1, 64<<20)
	s.maxInflight = o.Int("max_inflight", DefaultMaxInflight, 1, 65535)
	s.confirmTimeout = time.Duration(o.Int("confirm_timeout_ms", int(DefaultConfirmTimeout/time.Millisecond), 1, 600_000)) * time.Millisecond
	s.retry = time.Duration(o.Int("retry_ms", int(DefaultRetry/time.Millisecond), 100, 600_000)) * time.Millisecond
	return s, o.Err()
}
