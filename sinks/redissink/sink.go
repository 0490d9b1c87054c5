package redissink

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
)

// Register adds the redis sink to r.
func Register(r *sinks.Registry) { r.Register(Type, New) }

// New builds a redis sink from its config entry (a sinks.Factory). It does not connect: the first attempt
// does, so a Redis that is down at boot costs attempts, not the instance's start.
func New(spec config.SinkSpec, deps sinks.Deps) (sinks.Sink, error) {
	st, err := parse(spec)
	if err != nil {
		return nil, err
	}
	opts := *st.opts
	opts.DialTimeout = st.timeout
	opts.ReadTimeout = st.timeout
	opts.WriteTimeout = st.timeout
	opts.ContextTimeoutEnabled = true // the attempt's deadline bounds every read and write
	opts.DisableIdentity = true       // CLIENT SETINFO is Redis 7.2+; older servers answer an error per dial
	s := &sink{
		settings: st,
		client:   redis.NewClient(&opts),
		meta:     message.Meta{Instance: deps.Instance},
		log:      deps.Log.With().Str("sink", Type).Str("target", st.target).Logger(),
	}
	s.bufs.New = func() any { return new([]byte) }
	return s, nil
}

type sink struct {
	settings
	client *redis.Client
	meta   message.Meta
	log    zerolog.Logger
	bufs   sync.Pool // *[]byte message buffers, reused across attempts
	closed atomic.Bool
}

func (s *sink) Durable() bool       { return false }
func (s *sink) InlineMaxBytes() int { return s.inlineMax }

// Close closes the connection pool; attempts in flight fail.
func (s *sink) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		return s.client.Close()
	}
	return nil
}

func (s *sink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	if s.closed.Load() {
		return sinks.ErrClosed
	}
	if e.Claim == "" && len(e.Body) > s.inlineMax {
		return sinks.Permanent(fmt.Errorf("%w (%d > %d bytes)", ErrInlineTooLarge, len(e.Body), s.inlineMax))
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	bp := s.bufs.Get().(*[]byte)
	*bp = message.Encode((*bp)[:0], e, s.meta)
	// go-redis writes the arguments before Publish returns and keeps no reference: the buffer is free again.
	n, err := s.client.Publish(ctx, s.channel, *bp).Result()
	s.bufs.Put(bp)
	if err != nil {
		if s.closed.Load() {
			return sinks.ErrClosed
		}
		return fmt.Errorf("redissink: cannot publish to %s: %w", s.target, err)
	}
	if n < 1 {
		return ErrNoSubscribers
	}
	return nil
}
