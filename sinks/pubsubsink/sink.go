package pubsubsink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"golang.org/x/oauth2"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
)

// Connect back-off bounds (package doc).
const (
	minConnectBackoff = time.Second
	maxConnectBackoff = 30 * time.Second
)

// Register adds the google_pubsub sink to r.
func Register(r *sinks.Registry) { r.Register(Type, New) }

// New builds a google_pubsub sink from its config entry (a sinks.Factory). It validates the options only:
// the client is built by the first Deliver.
func New(spec config.SinkSpec, deps sinks.Deps) (sinks.Sink, error) {
	st, err := parse(spec)
	if err != nil {
		return nil, err
	}
	return &sink{settings: st, meta: message.Meta{Instance: deps.Instance}, now: time.Now}, nil
}

type sink struct {
	settings
	meta   message.Meta
	now    func() time.Time
	closed atomic.Bool

	mu        sync.Mutex // guards the fields below; never held across a publish
	client    *pubsub.Client
	pub       *pubsub.Publisher
	lastErr   error // why the last build failed
	retryAt   time.Time
	backoff   time.Duration
	closeDone bool
}

func (s *sink) Durable() bool { return true }

// InlineMaxBytes is inline_max_bytes (sinks.InlineLimiter): a longer body must arrive checked in.
func (s *sink) InlineMaxBytes() int { return s.inline }

// Close flushes what the publisher holds (each waiting Deliver gets its result), then closes the client.
func (s *sink) Close() error {
	s.closed.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeDone {
		return nil
	}
	s.closeDone = true
	if s.pub == nil {
		return nil
	}
	s.pub.Stop()
	err := s.client.Close()
	s.pub, s.client = nil, nil
	if err != nil {
		return fmt.Errorf("pubsubsink: cannot close the client: %w", err)
	}
	return nil
}

func (s *sink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	if s.closed.Load() {
		return sinks.ErrClosed
	}
	if e.Claim == "" && len(e.Body) > s.inline {
		return sinks.Permanent(fmt.Errorf("%w: %d bytes, inline_max_bytes %d", ErrNeedsClaim, len(e.Body), s.inline))
	}
	data := message.Encode(nil, e, s.meta) // the client keeps it until the batch is sent: not pooled
	attrs := message.Attributes(e)
	msg := &pubsub.Message{Data: data, Attributes: make(map[string]string, len(attrs)), OrderingKey: s.ordering}
	size := len(data) + len(s.ordering)
	for _, a := range attrs {
		msg.Attributes[a.Name] = a.Value
		size += len(a.Name) + len(a.Value)
	}
	if size > s.maxBytes {
		return sinks.Permanent(fmt.Errorf("%w: %d bytes, max_message_bytes %d", ErrTooLarge, size, s.maxBytes))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pubsubsink: attempt abandoned: %w", err)
	}
	pub, err := s.publisher(ctx)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err = pub.Publish(ctx, msg).Get(ctx); err != nil {
		if s.ordering != "" {
			pub.ResumePublish(s.ordering) // a failed publish pauses its key; this attempt reports the failure
		}
		return classify(fmt.Errorf("pubsubsink: cannot publish to %s: %w", s.topic, err))
	}
	return nil
}

// publisher returns the sink's publisher, building the client when there is none and the back-off allows.
func (s *sink) publisher(ctx context.Context) (*pubsub.Publisher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closeDone:
		return nil, sinks.ErrClosed
	case s.pub != nil:
		return s.pub, nil
	case s.now().Before(s.retryAt):
		return nil, fmt.Errorf("%w to %s: %w", ErrNotConnected, s.topic, s.lastErr)
	}
	// Building may resolve credentials over the network (auth metadata): bounded by the attempt and the
	// sink's timeout. Its context does not outlive the call in the connections it makes.
	bctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	client, err := pubsub.NewClient(bctx, s.project, s.clientOptions()...)
	if err != nil {
		s.backoff = min(max(2*s.backoff, minConnectBackoff), maxConnectBackoff)
		s.retryAt = s.now().Add(s.backoff)
		s.lastErr = err
		return nil, fmt.Errorf("%w to %s: %w", ErrNotConnected, s.topic, err)
	}
	pub := client.Publisher(s.topic)
	pub.PublishSettings.DelayThreshold = time.Millisecond // concurrent attempts share a request; one waits 1 ms
	pub.PublishSettings.Timeout = s.timeout
	pub.EnableMessageOrdering = s.ordering != ""
	s.client, s.pub, s.backoff, s.lastErr = client, pub, 0, nil
	return pub, nil
}

func (s *sink) clientOptions() []option.ClientOption {
	opts := []option.ClientOption{option.WithTelemetryDisabled()}
	if s.endpoint != "" {
		opts = append(opts, option.WithEndpoint(s.endpoint))
	}
	switch s.auth {
	case AuthToken:
		opts = append(opts, option.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: s.token, TokenType: "Bearer"})))
	case AuthNone:
		opts = append(opts, option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	return opts
}

// classify places a failed publish in its class (package doc). err wraps the client's error.
func classify(err error) error {
	if errors.Is(err, pubsub.ErrOversizedMessage) {
		return sinks.Permanent(err)
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.InvalidArgument:
		return sinks.Permanent(err)
	case codes.ResourceExhausted, codes.Unavailable:
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
				return sinks.RetryAfter(ri.GetRetryDelay().AsDuration(), err)
			}
		}
	}
	return err
}
