package rabbitsink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

const (
	// minBackoff is the first wait before reconnecting; it doubles up to retry_ms.
	minBackoff = 100 * time.Millisecond
	// dialTimeout bounds one TCP connect plus the AMQP handshake.
	dialTimeout = 5 * time.Second
	// closeReasonWait is how long a failed confirm waits for the channel's close reason, so the error can say
	// why the broker closed it (e.g. 404 no exchange).
	closeReasonWait = 100 * time.Millisecond
)

// Register adds the rabbitmq sink to r.
func Register(r *sinks.Registry) { r.Register(Type, New) }

// New builds a rabbitmq sink from its config entry (a sinks.Factory). It does not connect: the first Deliver
// does, so check-config never dials the broker.
func New(spec config.SinkSpec, deps sinks.Deps) (sinks.Sink, error) {
	st, err := parse(spec)
	if err != nil {
		return nil, err
	}
	return &sink{
		settings: st,
		log:      deps.Log.With().Str("sink", Type).Str("url", st.target).Str("exchange", st.exchange).Str("exchange_type", st.exchangeType).Logger(),
		meta:     message.Meta{Instance: deps.Instance},
		inflight: make(chan struct{}, st.maxInflight),
		ready:    make(chan struct{}),
		stopped:  make(chan struct{}),
	}, nil
}

type sink struct {
	settings
	log  zerolog.Logger
	meta message.Meta
	// inflight is the max_inflight semaphore.
	inflight chan struct{}

	start   sync.Once
	started bool          // set inside start
	ready   chan struct{} // closed when the first connection attempt finished, either way
	stopped chan struct{} // closed by Close
	tasks   task.Group    // the connection loop and each session's returns goroutine

	// blocked is the broker's reason while it blocks publishers on the current connection, else nil.
	blocked atomic.Pointer[string]

	mu      sync.Mutex
	sess    *session // the open session; nil while not connected
	lastErr error    // why the sink is not connected

	closed    atomic.Bool
	closeOnce sync.Once
}

// session is one open confirm-mode channel.
type session struct {
	conn *amqp.Connection
	ch   *amqp.Channel
	// done is closed when the channel closed; closeErr (set before) says why, nil for a clean close.
	done     chan struct{}
	closeErr *amqp.Error
	// barrier is taken by the returns goroutine between two returns (see the package doc).
	barrier chan struct{}

	mu       sync.Mutex
	waiting  map[string]int    // message id -> attempts waiting for its confirm
	returned map[string]string // message id -> reply text of a return for a waiting attempt
}

func (s *sink) Durable() bool { return true }

// InlineMaxBytes is the largest body the sink carries inline (sinks.InlineLimiter).
func (s *sink) InlineMaxBytes() int { return s.inlineMax }

// Close stops reconnecting, closes the connection (attempts waiting for a confirm fail with channel_closed)
// and waits for the sink's goroutines.
func (s *sink) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stopped)
		s.tasks.Stop()
	})
	return nil
}

func (s *sink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	if s.closed.Load() {
		return sinks.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rabbitsink: the attempt ended before publishing: %w", err)
	}
	if len(e.Body) > s.inlineMax && e.Claim == "" {
		return sinks.Permanent(fmt.Errorf("%w: a body of %d bytes exceeds inline_max_bytes %d and was not checked in", ErrOversize, len(e.Body), s.inlineMax))
	}
	key := s.routingKey.Append(nil, e)
	if len(key) > 255 {
		return sinks.Permanent(fmt.Errorf("rabbitsink: the routing key is %d bytes, AMQP carries at most 255", len(key)))
	}
	select {
	case s.inflight <- struct{}{}:
		defer func() { <-s.inflight }()
	default:
		return fmt.Errorf("%w: %d attempts already wait for confirms", ErrBusy, s.maxInflight)
	}
	sess, err := s.session(ctx)
	if err != nil {
		return err
	}
	if reason := s.blocked.Load(); reason != nil {
		return fmt.Errorf("%w: the broker blocks publishing (%s)", ErrPublishFailed, *reason)
	}

	id := e.Text()
	attrs := message.Attributes(e)
	headers := make(amqp.Table, len(attrs))
	for _, a := range attrs {
		headers[a.Name] = a.Value
	}
	pub := amqp.Publishing{
		Headers:      headers,
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    id,
		Timestamp:    time.UnixMilli(e.ReceivedAt),
		Body:         message.Encode(nil, e, s.meta),
	}
	sess.wait(id)
	defer sess.unwait(id)

	cctx, cancel := context.WithTimeout(ctx, s.confirmTimeout)
	defer cancel()
	dc, err := sess.ch.PublishWithDeferredConfirmWithContext(cctx, s.exchange, string(key), true, false, pub)
	switch {
	case err != nil && (errors.Is(err, amqp.ErrClosed) || sess.ch.IsClosed()):
		return s.channelClosed(sess, err)
	case err != nil:
		return fmt.Errorf("%w to exchange %q: %w", ErrPublishFailed, s.exchange, err)
	}
	select {
	case <-dc.Done():
	case <-sess.done:
		return s.channelClosed(sess, nil)
	case <-cctx.Done():
		if ctx.Err() != nil {
			return fmt.Errorf("%w: the attempt's deadline passed first: %w", ErrConfirmTimeout, ctx.Err())
		}
		return fmt.Errorf("%w: no confirm within %s", ErrConfirmTimeout, s.confirmTimeout)
	}
	if !dc.Acked() {
		// A channel that closes nacks every pending confirm: report the close, not a broker refusal.
		if sess.ch.IsClosed() {
			return s.channelClosed(sess, nil)
		}
		return fmt.Errorf("%w by the broker (exchange %q)", ErrNacked, s.exchange)
	}
	text, returned, err := sess.wasReturned(cctx, id)
	switch {
	case err != nil:
		return err
	case returned:
		return fmt.Errorf("%w: exchange %q routed routing key %q to no queue (%s)", ErrUnroutable, s.exchange, key, text)
	}
	return nil
}

// session returns the open session, starting the connection loop on first use. Until the first connection
// attempt finished it waits (within ctx); after that a missing session is not_connected at once.
func (s *sink) session(ctx context.Context) (*session, error) {
	s.start.Do(func() { s.started = s.tasks.Go(s.run) })
	if !s.started {
		return nil, sinks.ErrClosed
	}
	select {
	case <-s.ready:
	case <-s.stopped:
		return nil, sinks.ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: still connecting to %s: %w", ErrNotConnected, s.target, ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		return nil, fmt.Errorf("%w to %s: %w", ErrNotConnected, s.target, s.lastErr)
	}
	return s.sess, nil
}

// channelClosed builds the channel_closed error, with the broker's reason when it arrives promptly.
func (s *sink) channelClosed(sess *session, cause error) error {
	select {
	case <-sess.done:
	case <-time.After(closeReasonWait):
	}
	if sess.closeErr != nil && isDone(sess.done) {
		return fmt.Errorf("%w: %w", ErrChannelClosed, sess.closeErr)
	}
	if cause != nil {
		return fmt.Errorf("%w: %w", ErrChannelClosed, cause)
	}
	return ErrChannelClosed
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// run is the connection loop: connect, open a channel, wait for it to close, reopen it while the connection
// lives, redial otherwise, with back-off between failures, until Close.
func (s *sink) run(stop <-chan struct{}) {
	backoff := minBackoff
	var conn *amqp.Connection
	first := true
	defer func() {
		s.mu.Lock()
		s.sess, s.lastErr = nil, sinks.ErrClosed
		s.mu.Unlock()
		if conn != nil {
			_ = conn.Close() // nacks every pending confirm: their attempts fail with channel_closed
		}
	}()
	for {
		var err error
		if conn == nil || conn.IsClosed() {
			conn, err = amqp.DialConfig(s.url, amqp.Config{
				Dial:       amqp.DefaultDial(dialTimeout),
				Properties: amqp.Table{"connection_name": "ankusa " + s.meta.Instance},
			})
			if err != nil {
				conn = nil
			} else {
				s.watchBlocked(conn)
			}
		}
		var sess *session
		if err == nil {
			sess, err = s.open(conn)
		}
		s.mu.Lock()
		s.sess, s.lastErr = sess, err
		s.mu.Unlock()
		if first {
			first = false
			close(s.ready)
		}
		if err == nil {
			s.log.Info().Msg("rabbitmq sink connected")
			opened := time.Now()
			closes := sess.ch.NotifyClose(make(chan *amqp.Error, 1))
			select {
			case <-stop:
				close(sess.done) // attempts waiting on this session fail now, not at their deadline
				return
			case cerr := <-closes:
				sess.closeErr = cerr
				close(sess.done)
			}
			if sess.closeErr != nil {
				err = sess.closeErr
			} else {
				err = amqp.ErrClosed
			}
			s.mu.Lock()
			s.sess, s.lastErr = nil, err
			s.mu.Unlock()
			s.log.Warn().Err(err).Msg("rabbitmq sink channel closed; reconnecting")
			if time.Since(opened) > s.retry {
				backoff = minBackoff // a session that lived is not a failure streak
			}
		} else {
			s.log.Warn().Err(err).Dur("retry_in", backoff).Msg("rabbitmq sink cannot connect")
		}
		// ±20 % jitter so the sinks of a fleet do not reconnect in step.
		d := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		t := time.NewTimer(d)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, s.retry)
	}
}

// watchBlocked follows conn's connection.blocked notifications (a broker resource alarm) until conn closes.
// While the broker blocks publishers a write to the socket may never return, so Deliver refuses to publish
// instead of hanging past its deadline. Its own goroutine reads them: the library waits for a reader before
// it reads the next frame of the connection.
func (s *sink) watchBlocked(conn *amqp.Connection) {
	s.blocked.Store(nil)
	blockings := conn.NotifyBlocked(make(chan amqp.Blocking, 1))
	s.tasks.Go(func(stop <-chan struct{}) {
		for {
			select {
			case b, ok := <-blockings:
				if !ok {
					return
				}
				if b.Active {
					reason := b.Reason
					s.blocked.Store(&reason)
					s.log.Warn().Str("reason", reason).Msg("rabbitmq broker blocks publishing")
				} else {
					s.blocked.Store(nil)
				}
			case <-stop:
				return
			}
		}
	})
}

// open opens a confirm-mode channel on conn with its returns goroutine.
func (s *sink) open(conn *amqp.Connection) (*session, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("cannot open a channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("cannot put the channel in confirm mode: %w", err)
	}
	sess := &session{
		conn:     conn,
		ch:       ch,
		done:     make(chan struct{}),
		barrier:  make(chan struct{}),
		waiting:  make(map[string]int),
		returned: make(map[string]string),
	}
	// Unbuffered: the library hands over a return before it reads the ack that follows it.
	returns := ch.NotifyReturn(make(chan amqp.Return))
	if !s.tasks.Go(func(stop <-chan struct{}) { sess.receiveReturns(returns, stop) }) {
		_ = ch.Close()
		return nil, sinks.ErrClosed
	}
	return sess, nil
}

// receiveReturns records the returns of waiting attempts until the channel closes (the library closes
// returns) or the sink stops.
func (ss *session) receiveReturns(returns <-chan amqp.Return, stop <-chan struct{}) {
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				return
			}
			ss.mu.Lock()
			if ss.waiting[r.MessageId] > 0 {
				ss.returned[r.MessageId] = fmt.Sprintf("%d %s", r.ReplyCode, r.ReplyText)
			}
			ss.mu.Unlock()
		case ss.barrier <- struct{}{}:
		case <-stop:
			return
		}
	}
}

func (ss *session) wait(id string) {
	ss.mu.Lock()
	ss.waiting[id]++
	ss.mu.Unlock()
}

func (ss *session) unwait(id string) {
	ss.mu.Lock()
	if ss.waiting[id]--; ss.waiting[id] <= 0 {
		delete(ss.waiting, id)
		delete(ss.returned, id)
	}
	ss.mu.Unlock()
}

// wasReturned reports whether the broker returned message id, once every return received before the ack is
// recorded (the barrier). When the barrier cannot be passed (the channel closed, the deadline passed) the
// answer is unknown and the attempt fails: only a known-routed message is confirmed. Two attempts of one hook
// at once share the answer: they carry the same routing key, so they route alike.
func (ss *session) wasReturned(ctx context.Context, id string) (string, bool, error) {
	select {
	case <-ss.barrier:
	case <-ss.done:
		return "", false, fmt.Errorf("%w after the confirm, before its returns were read", ErrChannelClosed)
	case <-ctx.Done():
		return "", false, fmt.Errorf("%w: returns not read before the deadline: %w", ErrConfirmTimeout, ctx.Err())
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	text, ok := ss.returned[id]
	return text, ok, nil
}
