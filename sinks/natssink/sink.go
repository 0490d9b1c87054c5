package natssink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
)

// Reconnect back-off (see doc.go).
const (
	reconnectMin = 50 * time.Millisecond
	reconnectMax = 2 * time.Second
)

// Register adds the nats sink to r.
func Register(r *sinks.Registry) { r.Register(Type, New) }

// New builds a nats sink from its config entry (a sinks.Factory). It does not connect.
func New(spec config.SinkSpec, deps sinks.Deps) (sinks.Sink, error) {
	st, err := parse(spec)
	if err != nil {
		return nil, err
	}
	s := &sink{
		settings: st,
		meta:     message.Meta{Instance: deps.Instance},
		log:      deps.Log.With().Str("sink", Type).Str("target", st.target).Logger(),
		name:     "ankusa",
	}
	if deps.Instance != "" {
		s.name += " " + deps.Instance
	}
	s.bufs.New = func() any { return new([]byte) }
	s.ready = make(chan struct{})
	return s, nil
}

type sink struct {
	settings
	meta message.Meta
	log  zerolog.Logger
	name string
	bufs sync.Pool // *[]byte message buffers, reused across attempts

	// The first attempt starts the connect in a goroutine of its own, so no attempt waits for it longer
	// than its context allows (a server that accepts and never answers holds nats.Connect for its dial
	// timeout); Close waits for that goroutine.
	start   sync.Once
	ready   chan struct{} // closed when the first connect returned; nc, js and connErr are then fixed
	wg      sync.WaitGroup
	connErr error

	// mu orders the connect's outcome against Close.
	mu     sync.Mutex
	nc     *nats.Conn
	js     jetstream.JetStream
	closed atomic.Bool
}

func (s *sink) Durable() bool       { return true }
func (s *sink) InlineMaxBytes() int { return s.inlineMax }

// Close closes the connection and waits for a connect in progress; attempts in flight fail.
func (s *sink) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	nc := s.nc
	s.mu.Unlock()
	if nc != nil {
		nc.Close()
	}
	s.wg.Wait() // a connect still running closes its own connection once it sees closed
	return nil
}

// conn returns the JetStream context, starting the connect on first use and waiting for it at most until
// ctx is done. With RetryOnFailedConnect a first dial that fails still yields a connection that keeps
// redialling in the background, so a connect error is a configuration problem (an unreadable TLS file).
func (s *sink) conn(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
	s.start.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed.Load() {
			s.connErr = sinks.ErrClosed
			close(s.ready)
			return
		}
		s.wg.Add(1)
		go s.connect()
	})
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("%w to %s: still connecting: %w", ErrNotConnected, s.target, ctx.Err())
	}
	if s.connErr != nil {
		return nil, nil, s.connErr
	}
	return s.nc, s.js, nil
}

func (s *sink) connect() {
	defer s.wg.Done()
	defer close(s.ready)
	opts := []nats.Option{
		nats.Name(s.name),
		nats.Timeout(min(s.timeout, 5*time.Second)), // the dial and the wait for the server's INFO
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			return min(reconnectMin<<min(attempts, 16), reconnectMax)
		}),
		nats.ReconnectBufSize(-1), // fail an attempt while disconnected rather than buffer it
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if !s.closed.Load() { // nats.go calls it on Close too: a stop is not an outage
				s.log.Warn().Err(err).Msg("nats connection lost; reconnecting")
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { s.log.Info().Msg("nats connection restored") }),
	}
	opts = append(opts, s.auth...)
	opts = append(opts, s.tls...)
	nc, err := nats.Connect(strings.Join(s.servers, ","), opts...)
	var js jetstream.JetStream
	if err != nil {
		err = fmt.Errorf("natssink: cannot connect to %s: %w", s.target, err)
	} else if js, err = jetstream.New(nc); err != nil {
		nc.Close()
		err = fmt.Errorf("natssink: cannot use JetStream on %s: %w", s.target, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.closed.Load() {
		nc.Close()
		err = sinks.ErrClosed
	}
	if err != nil {
		s.connErr = err
		return
	}
	s.nc, s.js = nc, js
}

func (s *sink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	if s.closed.Load() {
		return sinks.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.Claim == "" && len(e.Body) > s.inlineMax {
		return sinks.Permanent(fmt.Errorf("%w (%d > %d bytes)", ErrInlineTooLarge, len(e.Body), s.inlineMax))
	}
	nc, js, err := s.conn(ctx)
	if err != nil {
		return err
	}
	if !nc.IsConnected() {
		return fmt.Errorf("%w to %s (%s)", ErrNotConnected, s.target, nc.Status())
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	attrs := message.Attributes(e)
	msg := &nats.Msg{Subject: s.subject, Header: make(nats.Header, len(attrs)+1)}
	for _, a := range attrs {
		msg.Header[a.Name] = []string{a.Value}
	}
	msgID := e.Text()
	if e.ReplayID != "" {
		msgID += ":replay:" + sinks.HeaderValue(e.ReplayID)
	}
	bp := s.bufs.Get().(*[]byte)
	*bp = message.Encode((*bp)[:0], e, s.meta)
	msg.Data = *bp
	// nats.go copies the message into the connection's buffer before PublishMsg waits for the ack, so the
	// buffer is free again whatever PublishMsg returns.
	_, err = js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID), jetstream.WithRetryAttempts(0))
	s.bufs.Put(bp)
	if err == nil {
		return nil // a duplicate ack too: the stream holds this id
	}
	switch {
	case s.closed.Load():
		return sinks.ErrClosed
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("%w: no stream is bound to subject %s on %s", ErrNoStream, s.subject, s.target)
	case errors.Is(err, nats.ErrMaxPayload):
		return sinks.Permanent(fmt.Errorf("natssink: message of %d bytes exceeds the server's max_payload: %w", len(msg.Data), err))
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return fmt.Errorf("%w to %s: %w", ErrNotConnected, s.target, err)
	}
	return fmt.Errorf("natssink: cannot publish to %s on %s: %w", s.subject, s.target, err)
}
