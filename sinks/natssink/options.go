package natssink

import (
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// Type is the YAML `type` of this sink.
const Type = "nats"

// Defaults (inventory D.2, D.5).
const (
	DefaultInlineMaxBytes = 65536
	DefaultPublishTimeout = 5 * time.Second
)

// settings is a validated sink entry.
type settings struct {
	servers   []string // nats:// or tls:// URLs
	target    string   // the servers without credentials, for errors and logs
	subject   string
	inlineMax int
	timeout   time.Duration
	auth      []nats.Option
	tls       []nats.Option
}

// parse validates spec's options; every problem is a *sinks.OptionError naming the option, never its value
// (servers, auth and tls may hold secrets).
func parse(spec config.SinkSpec) (settings, error) {
	o := sinks.NewOptions(Type, spec.Options)
	var s settings

	list, ok := o.Strings("servers")
	if !ok || len(list) == 0 {
		o.Fail("servers", "is required (a URL or a list of URLs)")
	}
	targets := make([]string, 0, len(list))
	for _, raw := range list {
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "tls") || strings.Contains(u.Host, ",") {
			o.Fail("servers", "each server must be host:port or a nats:// or tls:// URL")
			continue
		}
		s.servers = append(s.servers, raw)
		targets = append(targets, config.RedactURL(raw, false))
	}
	s.target = strings.Join(targets, ",")

	s.subject = o.RequiredString("subject")
	if s.subject != "" && !validSubject(s.subject) {
		o.Fail("subject", "must be a NATS subject without wildcards or spaces (tokens separated by dots)")
	}
	s.inlineMax = o.Int("inline_max_bytes", DefaultInlineMaxBytes, 0, 512<<20)
	s.timeout = time.Duration(o.Int("publish_timeout_ms", int(DefaultPublishTimeout/time.Millisecond), 1, 3_600_000)) * time.Millisecond

	if auth, ok := o.StringMap("auth"); ok {
		s.auth = parseAuth(o, auth)
	}
	if o.Has("tls") {
		s.tls = parseTLS(o, spec.Options["tls"])
	}
	return s, o.Err()
}

// parseAuth reads auth: {user, password} | {token} | {nkey_seed, jwt}.
func parseAuth(o *sinks.Options, a map[string]string) []nats.Option {
	keys := make([]string, 0, len(a))
	for k := range a {
		switch k {
		case "user", "password", "token", "nkey_seed", "jwt":
		default:
			o.Fail("auth."+k, "unknown option (auth takes user+password, token, or nkey_seed+jwt)")
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	switch strings.Join(keys, "+") {
	case "password+user":
		if a["user"] == "" {
			o.Fail("auth.user", "must not be empty")
			return nil
		}
		return []nats.Option{nats.UserInfo(a["user"], a["password"])}
	case "token":
		if a["token"] == "" {
			o.Fail("auth.token", "must not be empty")
			return nil
		}
		return []nats.Option{nats.Token(a["token"])}
	case "jwt+nkey_seed":
		kp, err := nkeys.FromSeed([]byte(a["nkey_seed"]))
		if err != nil {
			o.Fail("auth.nkey_seed", "is not an NKey seed")
			return nil
		}
		kp.Wipe()
		if a["jwt"] == "" {
			o.Fail("auth.jwt", "must not be empty")
			return nil
		}
		return []nats.Option{nats.UserJWTAndSeed(a["jwt"], a["nkey_seed"])}
	default:
		o.Fail("auth", "must be exactly one of user+password, token, or nkey_seed+jwt")
		return nil
	}
}

// parseTLS reads tls: true | {ca_file, cert_file, key_file}. Files are read when the sink connects.
func parseTLS(o *sinks.Options, v any) []nats.Option {
	if _, isBool := v.(bool); isBool {
		if o.Bool("tls", false) {
			return []nats.Option{nats.Secure()}
		}
		return nil
	}
	m, ok := o.StringMap("tls")
	if !ok {
		return nil
	}
	opts := []nats.Option{nats.Secure()}
	for k := range m {
		switch k {
		case "ca_file", "cert_file", "key_file":
		default:
			o.Fail("tls."+k, "unknown option (tls takes ca_file, cert_file, key_file)")
		}
	}
	if ca := m["ca_file"]; ca != "" {
		opts = append(opts, nats.RootCAs(ca))
	}
	switch cert, key := m["cert_file"], m["key_file"]; {
	case cert != "" && key != "":
		opts = append(opts, nats.ClientCert(cert, key))
	case cert != "" || key != "":
		o.Fail("tls", "cert_file and key_file go together")
	}
	return opts
}

// validSubject reports whether s is a literal subject a message can be published to.
func validSubject(s string) bool {
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c <= ' ' || c == 0x7f || c == '*' || c == '>' {
				return false
			}
		}
	}
	return true
}
