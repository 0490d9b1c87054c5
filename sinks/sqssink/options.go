package sqssink

import (
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// Type is the YAML `type` of this sink.
const Type = "sqs"

// Defaults and limits (inventory D.2).
const (
	DefaultInlineMaxBytes  = 65536
	DefaultMaxMessageBytes = 1_048_576 // SQS's own limit for body plus attributes
	DefaultTimeout         = 5 * time.Second
)

// settings is a validated sink entry.
type settings struct {
	queueURL string
	target   string // config.RedactURL of queue_url: what errors name
	fifo     bool
	region   string
	endpoint string // BaseEndpoint; "" for the AWS endpoint of region
	group    string // message_group_id; "" means <tenant>/<source> per hook
	inline   int
	maxBytes int
	timeout  time.Duration
	static   *staticCredentials // nil: the SDK's default chain
}

// staticCredentials are the credentials option. They are never logged, printed or echoed in an error.
type staticCredentials struct{ id, secret, session string }

// parse validates spec's options; every problem is a *sinks.OptionError naming the option, never its value.
func parse(spec config.SinkSpec) (settings, error) {
	o := sinks.NewOptions(Type, spec.Options)
	var s settings

	if raw := o.RequiredString("queue_url"); raw != "" {
		u, err := url.Parse(raw)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			o.Fail("queue_url", "must be an absolute http(s) URL")
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			o.Fail("queue_url", "must not carry userinfo, a query or a fragment")
		case strings.Trim(u.Path, "/") == "":
			o.Fail("queue_url", "must name a queue (https://sqs.<region>.amazonaws.com/<account>/<queue>)")
		default:
			s.queueURL = raw
			s.target = config.RedactURL(raw, false)
			s.fifo = strings.HasSuffix(strings.TrimRight(u.Path, "/"), ".fifo")
			s.region = regionOf(u.Host)
		}
	}
	if r := o.String("region", ""); r != "" {
		s.region = r
	}
	if ep := o.String("endpoint", ""); ep != "" {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			o.Fail("endpoint", "must be an absolute http(s) URL without userinfo")
		} else {
			s.endpoint = ep
		}
	}
	if g := o.String("message_group_id", ""); g != "" {
		if !s.fifo && s.queueURL != "" {
			o.Fail("message_group_id", "applies to FIFO queues only (queue_url ending in .fifo)")
		} else if !validAttrID(g) {
			o.Fail("message_group_id", "must be 1..128 printable ASCII characters")
		} else {
			s.group = g
		}
	}
	s.maxBytes = o.Int("max_message_bytes", DefaultMaxMessageBytes, 1024, DefaultMaxMessageBytes)
	s.inline = o.Int("inline_max_bytes", DefaultInlineMaxBytes, 0, s.maxBytes)
	s.timeout = time.Duration(o.Int("timeout_ms", int(DefaultTimeout/time.Millisecond), 1, 3_600_000)) * time.Millisecond

	if o.Has("credentials") {
		if m, ok := o.StringMap("credentials"); ok {
			s.static = &staticCredentials{id: m["access_key_id"], secret: m["secret_access_key"], session: m["session_token"]}
			for k := range m {
				switch k {
				case "access_key_id", "secret_access_key", "session_token":
				default:
					o.Fail("credentials."+k, "unknown option (access_key_id, secret_access_key, session_token)")
				}
			}
			if s.static.id == "" {
				o.Fail("credentials.access_key_id", "is required with credentials")
			}
			if s.static.secret == "" {
				o.Fail("credentials.secret_access_key", "is required with credentials")
			}
		}
	}
	if s.queueURL != "" && s.region == "" && s.endpoint != "" {
		// A local stand-in (goaws, localstack) ignores the region, but SigV4 needs one to sign.
		s.region = "us-east-1"
	}
	return s, o.Err()
}

// regionOf reads the region out of an AWS queue host: sqs.<region>.amazonaws.com(.cn) or the legacy
// <region>.queue.amazonaws.com; "" for any other host.
func regionOf(host string) string {
	host = strings.ToLower(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	rest, ok := strings.CutSuffix(host, ".amazonaws.com")
	if !ok {
		if rest, ok = strings.CutSuffix(host, ".amazonaws.com.cn"); !ok {
			return ""
		}
	}
	if r, ok := strings.CutPrefix(rest, "sqs."); ok && !strings.Contains(r, ".") {
		return r
	}
	if r, ok := strings.CutSuffix(rest, ".queue"); ok && !strings.Contains(r, ".") {
		return r
	}
	return ""
}

// validAttrID reports whether s can be a MessageGroupId or MessageDeduplicationId: 1..128 characters from
// !-~ (the SQS rule: alphanumerics and punctuation).
func validAttrID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}
