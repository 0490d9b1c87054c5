package httpsink

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// Type is the YAML `type` of this sink.
const Type = "http"

// Defaults (inventory D.2).
const (
	DefaultTimeout          = 5 * time.Second
	DefaultMaxResponseBytes = 65536
)

// settings is a validated sink entry.
type settings struct {
	url *url.URL
	// target is what errors and logs name: config.RedactURL of the url (no userinfo, no query values, no
	// path token; no path at all under secret_path), since every one of them may hold a secret.
	target  string
	method  string
	static  []header // canonical name, value
	forward []string // nil: the default filter
	secrets [][]byte
	timeout time.Duration
	maxResp int64
}

type header struct{ name, value string }

// parse validates spec's options; every problem is an *sinks.OptionError naming the option, never its value.
func parse(spec config.SinkSpec) (settings, error) {
	o := sinks.NewOptions(Type, spec.Options)
	var s settings

	secretPath := o.Bool("secret_path", false)
	if raw := o.RequiredString("url"); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			o.Fail("url", "must be an absolute http(s) URL")
		} else {
			s.url = u
			s.target = config.RedactURL(raw, secretPath)
		}
	}

	switch m := strings.ToLower(o.String("method", "post")); m {
	case "post", "put", "patch":
		s.method = strings.ToUpper(m)
	default:
		o.Fail("method", "must be one of post|put|patch")
	}

	if hs, ok := o.StringMap("headers"); ok {
		names := make([]string, 0, len(hs))
		for n := range hs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			v := hs[n]
			switch {
			case !validName(n):
				o.Fail("headers", "a header name is not a valid HTTP token")
			case reserved(strings.ToLower(n)):
				o.Fail("headers."+n, "is set by the sink and cannot be configured")
			case !validValue(v):
				o.Fail("headers."+n, "value holds a control character")
			default:
				s.static = append(s.static, header{http.CanonicalHeaderKey(n), v})
			}
		}
	}

	s.timeout = time.Duration(o.Int("timeout_ms", int(DefaultTimeout/time.Millisecond), 1, 3_600_000)) * time.Millisecond

	if list, ok := o.Strings("secret"); ok {
		if len(list) == 0 {
			o.Fail("secret", "must not be an empty list")
		}
		for i, sec := range list {
			key, err := decodeSecret(sec)
			if err != nil {
				name := "secret"
				if _, isList := spec.Options["secret"].([]any); isList {
					name += "[" + strconv.Itoa(i) + "]"
				}
				o.Fail(name, "must be whsec_<base64> (Standard Webhooks secret)")
				continue
			}
			s.secrets = append(s.secrets, key)
		}
	}

	s.maxResp = int64(o.Int("max_response_bytes", DefaultMaxResponseBytes, 0, 64<<20))

	if list, ok := o.Strings("forward_headers"); ok {
		s.forward = make([]string, 0, len(list))
		for _, n := range list {
			if !validName(n) {
				o.Fail("forward_headers", "a header name is not a valid HTTP token")
				continue
			}
			s.forward = append(s.forward, strings.ToLower(n))
		}
	}

	return s, o.Err()
}

// decodeSecret reads a Standard Webhooks secret: "whsec_" + base64 of the key. The prefix is optional, as in
// the Standard Webhooks reference libraries.
func decodeSecret(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil {
		return nil, err
	}
	if len(key) == 0 {
		return nil, errEmptySecret // reported by option name by the caller
	}
	return key, nil
}

// reserved names the headers the sink owns; a static header may not replace them.
func reserved(lower string) bool {
	switch lower {
	case "host", "content-length", "content-type", "connection", "keep-alive", "transfer-encoding", "te",
		"trailer", "upgrade", "expect", "webhook-id", "webhook-timestamp", "webhook-signature":
		return true
	}
	return strings.HasPrefix(lower, "x-ankusa-")
}

// validName reports whether s is an RFC 9110 token.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validValue reports whether s can be sent as a field value (no control characters but tab).
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
