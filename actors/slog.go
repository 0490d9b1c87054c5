package actors

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rs/zerolog"
)

// slogHandler forwards log/slog records (protoactor logs through slog) to a zerolog logger, keeping the level,
// the message and every attribute as a structured field.
type slogHandler struct {
	log    zerolog.Logger
	attrs  []slog.Attr // from WithAttrs, already prefixed with the groups open at the time
	prefix string      // open groups, "a.b."
}

// NewSlogHandler returns a slog.Handler that writes to log. An attribute named "message" (protoactor uses the
// name for the message of a dead letter or a failure) is written as "message_type" holding only its Go type: a
// message can carry a webhook body or a secret, and those never reach a log line. Attributes that would collide
// with zerolog's own level and time fields are prefixed with "slog_".
func NewSlogHandler(log zerolog.Logger) slog.Handler {
	return &slogHandler{log: log}
}

func zerologLevel(l slog.Level) zerolog.Level {
	switch {
	case l < slog.LevelInfo:
		return zerolog.DebugLevel
	case l < slog.LevelWarn:
		return zerolog.InfoLevel
	case l < slog.LevelError:
		return zerolog.WarnLevel
	default:
		return zerolog.ErrorLevel
	}
}

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool {
	zl := zerologLevel(l)
	return zl >= h.log.GetLevel() && zl >= zerolog.GlobalLevel()
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	e := h.log.WithLevel(zerologLevel(r.Level))
	if e == nil {
		return nil
	}
	for _, a := range h.attrs {
		addAttr(e, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(e, h.prefix, a)
		return true
	})
	e.Msg(r.Message)
	return nil
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	nh := *h
	nh.attrs = make([]slog.Attr, 0, len(h.attrs)+len(attrs))
	nh.attrs = append(nh.attrs, h.attrs...)
	for _, a := range attrs {
		a.Key = h.prefix + a.Key
		nh.attrs = append(nh.attrs, a)
	}
	return &nh
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	nh := *h
	nh.prefix = h.prefix + name + "."
	return &nh
}

func addAttr(e *zerolog.Event, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	key := prefix + a.Key
	switch key {
	case messageAttr:
		key = "message_type"
	case zerolog.LevelFieldName, zerolog.TimestampFieldName:
		key = "slog_" + key
	}
	v := a.Value
	switch v.Kind() {
	case slog.KindGroup:
		p := key + "."
		if a.Key == "" { // an inline group adds its attributes at the current level
			p = prefix
		}
		for _, ga := range v.Group() {
			addAttr(e, p, ga)
		}
	case slog.KindString:
		e.Str(key, v.String())
	case slog.KindInt64:
		e.Int64(key, v.Int64())
	case slog.KindUint64:
		e.Uint64(key, v.Uint64())
	case slog.KindFloat64:
		e.Float64(key, v.Float64())
	case slog.KindBool:
		e.Bool(key, v.Bool())
	case slog.KindDuration:
		e.Dur(key, v.Duration())
	case slog.KindTime:
		e.Time(key, v.Time())
	default:
		anyAttr(e, key, a.Key, v.Any())
	}
}

// messageAttr is the attribute name protoactor gives a message it logs.
const messageAttr = "message"

func anyAttr(e *zerolog.Event, key, name string, v any) {
	if name == messageAttr {
		if v == nil {
			e.Str(key, "<nil>")
			return
		}
		e.Str(key, fmt.Sprintf("%T", v))
		return
	}
	switch x := v.(type) {
	case nil:
		e.Str(key, "<nil>")
	case error:
		e.Str(key, x.Error())
	case fmt.Stringer:
		e.Str(key, x.String())
	default:
		e.Str(key, fmt.Sprint(x))
	}
}
