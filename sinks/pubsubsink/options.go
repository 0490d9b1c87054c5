package pubsubsink

import (
	"strings"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// Type is the YAML `type` of this sink.
const Type = "google_pubsub"

// Defaults and limits (inventory D.2).
const (
	DefaultInlineMaxBytes  = 65536
	DefaultMaxMessageBytes = 10_000_000 // Pub/Sub's limit for one publish request
	DefaultTimeout         = 5 * time.Second
)

// Auth modes of the `auth` option.
const (
	AuthMetadata = "metadata" // Application Default Credentials: the metadata server, a key file, gcloud
	AuthToken    = "token"    // a static OAuth2 access token (`token`)
	AuthNone     = "none"     // no credentials and no TLS: the emulator, or pstest
)

// settings is a validated sink entry.
type settings struct {
	project  string
	topic    string // projects/<project>/topics/<topic>
	endpoint string // host:port; "" for Pub/Sub's own
	ordering string // ordering_key; "" publishes unordered
	inline   int
	maxBytes int
	timeout  time.Duration
	auth     string
	token    string // never logged, printed or echoed in an error
}

// parse validates spec's options; every problem is a *sinks.OptionError naming the option, never its value.
func parse(spec config.SinkSpec) (settings, error) {
	o := sinks.NewOptions(Type, spec.Options)
	var s settings

	topic := o.RequiredString("topic")
	s.project = o.String("project", "")
	switch parts := strings.Split(topic, "/"); {
	case topic == "":
	case len(parts) == 4 && parts[0] == "projects" && parts[2] == "topics" && parts[1] != "" && parts[3] != "":
		if s.project != "" && s.project != parts[1] {
			o.Fail("project", "differs from the project of topic")
		}
		s.project, s.topic = parts[1], topic
	case strings.Contains(topic, "/"):
		o.Fail("topic", "must be a topic id or projects/<project>/topics/<topic>")
	case s.project == "":
		o.Fail("project", "is required unless topic is projects/<project>/topics/<topic>")
	default:
		s.topic = "projects/" + s.project + "/topics/" + topic
	}
	if ep := o.String("endpoint", ""); ep != "" {
		if strings.Contains(ep, "/") || !strings.Contains(ep, ":") {
			o.Fail("endpoint", "must be host:port")
		} else {
			s.endpoint = ep
		}
	}
	s.ordering = o.String("ordering_key", "")
	if len(s.ordering) > 1024 {
		o.Fail("ordering_key", "must be at most 1024 bytes")
	}
	s.maxBytes = o.Int("max_message_bytes", DefaultMaxMessageBytes, 1024, DefaultMaxMessageBytes)
	s.inline = o.Int("inline_max_bytes", DefaultInlineMaxBytes, 0, s.maxBytes)
	s.timeout = time.Duration(o.Int("timeout_ms", int(DefaultTimeout/time.Millisecond), 1, 3_600_000)) * time.Millisecond

	s.auth = o.String("auth", AuthMetadata)
	s.token = o.String("token", "")
	switch s.auth {
	case AuthMetadata:
		if s.token != "" {
			o.Fail("token", "applies to auth: token only")
		}
	case AuthToken:
		if s.token == "" {
			o.Fail("token", "is required with auth: token")
		}
	case AuthNone:
		if s.token != "" {
			o.Fail("token", "applies to auth: token only")
		}
		if s.endpoint == "" {
			o.Fail("endpoint", "is required with auth: none (an emulator's host:port)")
		}
	default:
		o.Fail("auth", "must be one of metadata|token|none")
	}
	return s, o.Err()
}
