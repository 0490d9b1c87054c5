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
		"max_response_bytes",
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
	for k, v := range s.Options {
		switch {
		case slices.Contains(sinkURLKeys, k):
			m[k] = redactURLs(v)
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
func redactURLs(v any) any {
	switch x := v.(type) {
	case string:
		return redactURL(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if s, ok := e.(string); ok {
				out[i] = redactURL(s)
			} else {
				out[i] = redacted
			}
		}
		return out
	}
	return redacted
}

// redactURL keeps scheme, host and path; drops userinfo and fragment; keeps query names with their
// values redacted. A bare "user:pass@host:port" loses everything up to the "@". Unparseable → redacted.
func redactURL(s string) string {
	if !strings.Contains(s, "://") {
		if i := strings.LastIndexByte(s, '@'); i >= 0 {
			s = s[i+1:]
		}
		if strings.ContainsAny(s, "?#") {
			return redacted
		}
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return redacted
	}
	out := u.Scheme + "://" + u.Host + u.EscapedPath()
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
