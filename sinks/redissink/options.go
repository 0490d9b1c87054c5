package redissink

import (
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// Type is the YAML `type` of this sink.
const Type = "redis"

// Defaults (inventory D.2, D.5).
const (
	DefaultInlineMaxBytes = 65536
	DefaultPublishTimeout = 5 * time.Second
)

// settings is a validated sink entry.
type settings struct {
	opts      *redis.Options
	target    string // the URL without credentials, for errors and logs
	channel   string
	inlineMax int
	timeout   time.Duration
}

// parse validates spec's options; every problem is a *sinks.OptionError naming the option, never its value
// (the URL may hold a password).
func parse(spec config.SinkSpec) (settings, error) {
	o := sinks.NewOptions(Type, spec.Options)
	var s settings
	if raw := o.RequiredString("url"); raw != "" {
		u, err := url.Parse(raw)
		switch {
		case err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "":
			o.Fail("url", "must be a redis:// or rediss:// URL")
		default:
			opts, err := redis.ParseURL(raw)
			if err != nil {
				o.Fail("url", "is not a URL Redis accepts (host, port, database number, query options)")
				break
			}
			s.opts = opts
			s.target = config.RedactURL(raw, false)
		}
	}
	s.channel = o.RequiredString("channel")
	s.inlineMax = o.Int("inline_max_bytes", DefaultInlineMaxBytes, 0, 512<<20)
	s.timeout = time.Duration(o.Int("publish_timeout_ms", int(DefaultPublishTimeout/time.Millisecond), 1, 3_600_000)) * time.Millisecond
	return s, o.Err()
}
