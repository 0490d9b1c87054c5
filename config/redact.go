package config

import (
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/ankusa-go/ankusa/verify"
)

const redacted = "[REDACTED]"

// Sink option keys whose values are shown by Redacted. Everything else a sink entry holds (secret,
// headers, auth, sasl, tls, token, credentials, ...) is replaced by "[REDACTED]".
var (
	// URL-valued keys: shown without userinfo, fragment or query values.
	sinkURLKeys = []string{"url", "endpoint", "queue_url", "servers", "brokers"}
	// Plain keys: names of destinations and numeric tuning, never credentials.
	sinkPlainKeys = []string{
		"topic", "exchange", "exchange_type", "routing_key", "subject", "channel", "bucket", "region",
		"stream", "project", "message_group_id", "ordering_key", "method",
		"timeout_ms", "inline_max_bytes", "max_inflight", "confirm_timeout_ms", "retry_ms",
		"max_record_bytes", "produce_timeout_ms", "publish_timeout_ms", "max_message_bytes",
		"max_response_bytes", "secret_path",
	}
)

// Redacted is the print-config view of c (keyed by the YAML names, ready for JSON): sink options keep
// only the allow-listed keys, URLs lose their userinfo and query values, fields tagged `config:"secret"`
// and every other sink option value read "[REDACTED]".
func (c *Config) Redacted() map[string]any {
	m, _ := redactValue(reflect.ValueOf(c).Elem(), false).(map[string]any)
	return m
}

func redactValue(v reflect.Value, secret bool) any {
	if secret && !v.IsZero() {
		return redacted
	}
	if v.Type() == reflect.TypeFor[SinkSpec]() {
		return redactSink(v.Interface().(SinkSpec))
	}
	if v.Type() == reflect.TypeFor[verify.Spec]() {
		return redactVerify(v)
	}
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		m := map[string]any{}
		for name, f := range fields(t) {
			m[name] = redactValue(v.Field(f.index), f.secret)
		}
		return m
	case reflect.Map:
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[it.Key().String()] = redactValue(it.Value(), false)
		}
		return m
	case reflect.Slice:
		l := make([]any, v.Len())
		for i := range l {
			l[i] = redactValue(v.Index(i), false)
		}
		return l
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return redactValue(v.Elem(), false)
	}
	return v.Interface()
}

// redactVerify prints a verify block as written: the keys its type uses (the others are empty and only
// noise), the secret and a basic credential's username as "[REDACTED]".
func redactVerify(v reflect.Value) map[string]any {
	m := map[string]any{}
	for name, f := range fields(v.Type()) {
		fv := v.Field(f.index)
		if fv.IsZero() && name != "type" {
			continue
		}
		m[name] = redactValue(fv, f.secret || name == "username")
	}
	return m
}

func redactSink(s SinkSpec) map[string]any {
	m := map[string]any{"type": s.Type, "ordered": s.Ordered}
	secretPath, _ := s.Options["secret_path"].(bool)
	for k, v := range s.Options {
		switch {
		case slices.Contains(sinkURLKeys, k):
			m[k] = redactURLs(v, secretPath)
		case slices.Contains(sinkPlainKeys, k) && isScalar(v):
			m[k] = v
		default:
			m[k] = redacted
		}
	}
	return m
}

func isScalar(v any) bool {
	switch v.(type) {
	case nil, bool, int, int64, float64, string:
		return true
	}
	return false
}

// redactURLs sanitises a URL or a list of URLs; anything else under a URL key is redacted whole.
func redactURLs(v any, secretPath bool) any {
	switch x := v.(type) {
	case string:
		return RedactURL(x, secretPath)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if s, ok := e.(string); ok {
				out[i] = RedactURL(s, secretPath)
			} else {
				out[i] = redacted
			}
		}
		return out
	}
	return redacted
}

// MinPathToken is the shortest path segment RedactURL takes for a token.
const MinPathToken = 16

// RedactURL is how a sink URL is shown anywhere outside the sink: print-config, delivery errors, stored
// LastError and DeadReason rows, logs. It keeps scheme, host and path; drops userinfo and fragment; keeps
// query names with their values redacted. Webhook URLs often carry their secret in the path (Slack's
// /services/T…/B…/<secret>, Discord's /api/webhooks/<id>/<token>), so every path segment of at least
// MinPathToken characters that mixes at least two of lowercase letters, uppercase letters and digits is
// replaced by "[REDACTED]"; with secretPath (the sink option secret_path: true, for shorter or unusual
// tokens) the whole path is. A bare "user:pass@host:port" loses everything up to the "@". Unparseable →
// redacted whole.
func RedactURL(s string, secretPath bool) string {
	if !strings.Contains(s, "://") {
		if i := strings.LastIndexByte(s, '@'); i >= 0 {
			s = s[i+1:]
		}
		if strings.ContainsAny(s, "?#") {
			return redacted
		}
		if i := strings.IndexByte(s, '/'); i >= 0 {
			return s[:i] + redactPath(s[i:], secretPath)
		}
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return redacted
	}
	out := u.Scheme + "://" + u.Host + redactPath(u.EscapedPath(), secretPath)
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return out + "?" + redacted
		}
		names := make([]string, 0, len(q))
		for k := range q {
			names = append(names, url.QueryEscape(k)+"="+redacted)
		}
		slices.Sort(names)
		out += "?" + strings.Join(names, "&")
	}
	return out
}

// redactPath applies RedactURL's path rule to an escaped path.
func redactPath(p string, secretPath bool) string {
	if p == "" || p == "/" {
		return p
	}
	if secretPath {
		return "/" + redacted
	}
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		if pathToken(seg) {
			segs[i] = redacted
		}
	}
	return strings.Join(segs, "/")
}

// pathToken reports whether an escaped path segment looks like a token: long, and mixing character classes
// as random text does (so /orders-processing-queue is kept, /T0A1B2C3D4E5F6G7H8 is not).
func pathToken(seg string) bool {
	if len(seg) < MinPathToken {
		return false
	}
	var lower, upper, digit int
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; {
		case 'a' <= c && c <= 'z':
			lower = 1
		case 'A' <= c && c <= 'Z':
			upper = 1
		case '0' <= c && c <= '9':
			digit = 1
		}
	}
	return lower+upper+digit >= 2
}

// RedactedSink is the print-config view of one sink entry: the allow-listed option keys, URLs without
// userinfo and query values, every other option "[REDACTED]". Whatever describes a sink to the outside (the
// AsyncAPI document) reads it from here, never from the options themselves.
func RedactedSink(s SinkSpec) map[string]any { return redactSink(s) }
