package logsink

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
)

// Type is the YAML `type` of this sink.
const Type = "log"

// Register adds the log sink to r.
func Register(r *sinks.Registry) { r.Register(Type, New) }

// New builds a log sink writing to deps.Log (a sinks.Factory). The sink takes no options.
func New(spec config.SinkSpec, deps sinks.Deps) (sinks.Sink, error) {
	if err := sinks.NewOptions(Type, spec.Options).Err(); err != nil {
		return nil, err
	}
	return &sink{log: deps.Log.With().Str("sink", Type).Logger()}, nil
}

type sink struct {
	log    zerolog.Logger
	closed atomic.Bool
}

func (s *sink) Durable() bool { return false }

func (s *sink) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *sink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("logsink: attempt abandoned: %w", err)
	}
	if s.closed.Load() {
		return sinks.ErrClosed
	}
	ev := s.log.Info().
		Str("id", e.Text()).
		Str("source", e.Source).
		Str("tenant", e.Tenant).
		Int("size", len(e.Body)).
		Str("content_type", e.ContentType).
		Int("attempt", e.Attempt)
	if e.Verification != "" {
		ev = ev.Str("verification", e.Verification)
	}
	if e.Flagged {
		ev = ev.Bool("flagged", true)
	}
	if e.ReplayID != "" {
		ev = ev.Str("replay_id", e.ReplayID)
	}
	ev.Msg("hook delivered")
	return nil
}
