package sinks

import (
	"errors"
	"math"
	"sort"
	"strconv"
)

// Options reads one sink entry's options for a factory, collecting every problem as an *OptionError (by option
// name, never by value). Values arrive as the config walk decodes them: string, int, float64, bool, nil, []any
// and map[string]any; a nil value counts as absent.
//
//	o := sinks.NewOptions("http", spec.Options)
//	url := o.RequiredString("url")
//	timeout := o.Int("timeout_ms", 5000, 1, 3_600_000)
//	if err := o.Err(); err != nil { ... }
type Options struct {
	sink string
	m    map[string]any
	used map[string]bool
	errs []error
}

// NewOptions starts reading the options m of a sink of type sinkType.
func NewOptions(sinkType string, m map[string]any) *Options {
	return &Options{sink: sinkType, m: m, used: make(map[string]bool, len(m))}
}

// Fail records a problem with option key.
func (o *Options) Fail(key, msg string) {
	o.errs = append(o.errs, &OptionError{Sink: o.sink, Option: key, Msg: msg})
}

func (o *Options) get(key string) (any, bool) {
	o.used[key] = true
	v, ok := o.m[key]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

// Has reports whether key is present with a non-nil value (and marks it known).
func (o *Options) Has(key string) bool {
	_, ok := o.get(key)
	return ok
}

// String returns the string option key, or def when absent.
func (o *Options) String(key, def string) string {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		o.Fail(key, "must be a string, got "+kind(v))
		return def
	}
	return s
}

// RequiredString returns the string option key, recording "is required" when it is absent or empty.
func (o *Options) RequiredString(key string) string {
	v, ok := o.get(key)
	if !ok {
		o.Fail(key, "is required")
		return ""
	}
	s, ok := v.(string)
	switch {
	case !ok:
		o.Fail(key, "must be a string, got "+kind(v))
	case s == "":
		o.Fail(key, "must not be empty")
	}
	return s
}

// Int returns the integer option key within [min, max], or def when absent.
func (o *Options) Int(key string, def, min, max int) int {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	var n int
	switch x := v.(type) {
	case int:
		n = x
	case int64:
		n = int(x)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			o.Fail(key, "must be an integer")
			return def
		}
		n = int(x)
	default:
		o.Fail(key, "must be an integer, got "+kind(v))
		return def
	}
	if n < min || n > max {
		o.Fail(key, "must be in "+strconv.Itoa(min)+".."+strconv.Itoa(max)+", got "+strconv.Itoa(n))
		return def
	}
	return n
}

// Bool returns the boolean option key, or def when absent.
func (o *Options) Bool(key string, def bool) bool {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		o.Fail(key, "must be a boolean, got "+kind(v))
		return def
	}
	return b
}

// Strings returns an option given as one string or a list of strings; ok is false when absent.
func (o *Options) Strings(key string) (list []string, ok bool) {
	v, ok := o.get(key)
	if !ok {
		return nil, false
	}
	switch x := v.(type) {
	case string:
		return []string{x}, true
	case []any:
		out := make([]string, 0, len(x))
		for i, e := range x {
			s, isString := e.(string)
			if !isString {
				o.Fail(key+"["+strconv.Itoa(i)+"]", "must be a string, got "+kind(e))
				continue
			}
			out = append(out, s)
		}
		return out, true
	case []string:
		return append([]string(nil), x...), true
	default:
		o.Fail(key, "must be a string or a list of strings, got "+kind(v))
		return nil, false
	}
}

// StringMap returns a mapping of strings to strings; ok is false when absent.
func (o *Options) StringMap(key string) (m map[string]string, ok bool) {
	v, ok := o.get(key)
	if !ok {
		return nil, false
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]string, len(x))
		for k, e := range x {
			s, isString := e.(string)
			if !isString {
				o.Fail(key+"."+k, "must be a string, got "+kind(e))
				continue
			}
			out[k] = s
		}
		return out, true
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out, true
	default:
		o.Fail(key, "must be a mapping of strings, got "+kind(v))
		return nil, false
	}
}

// Err returns every problem recorded so far plus one "unknown option" per key that was never read, sorted by
// key; nil when the options are fine.
func (o *Options) Err() error {
	var unknown []string
	for k := range o.m {
		if !o.used[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	errs := o.errs
	for _, k := range unknown {
		errs = append(errs, &OptionError{Sink: o.sink, Option: k, Msg: "unknown option"})
	}
	return errors.Join(errs...)
}

// kind names a decoded value's type for a problem message, never its content.
func kind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int, int64, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any, []string:
		return "a list"
	case map[string]any, map[string]string:
		return "a mapping"
	default:
		return "an unsupported value"
	}
}
