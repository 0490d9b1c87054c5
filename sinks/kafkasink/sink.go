package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
)

// batchOverhead is what a record batch adds around one record (61 bytes of batch header plus the record's own
// framing), rounded up: the client's batch limit must let a record of max_record_bytes through on its own.
const batchOverhead = 512

// defaultBatchMax is franz-go's (and Kafka's) default batch limit; a larger max_record_bytes raises it.
const defaultBatchMax = 1_000_012

// maxBuffered bounds the records the client holds for all attempts together; past it an attempt is refused
// as busy at once instead of queueing behind a stalled cluster.
const maxBuffered = 10_000

// Register adds the kafka sink to r.
func Register(r *sinks.Registry) { r.Register(Type, New) }

// New builds a kafka sink from its config entry (a sinks.Factory). It does not connect: the client dials the
// brokers on the first produce, so check-config never touches the cluster.
func New(spec config.SinkSpec, deps sinks.Deps) (sinks.Sink, error) {
	st, err := parse(spec)
	if err != nil {
		return nil, err
	}
	return newSink(st, deps)
}

func newSink(st settings, deps sinks.Deps, extra ...kgo.Opt) (*sink, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(st.brokers...),
		kgo.DefaultProduceTopic(st.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// No linger: an attempt waits for its acknowledgement, and while one request is in flight the client
		// batches every record buffered behind it anyway.
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(st.produceTimeout),
		kgo.ProduceRequestTimeout(st.produceTimeout),
		kgo.ProducerBatchMaxBytes(int32(max(defaultBatchMax, st.maxRecord+batchOverhead))),
		kgo.MaxBufferedRecords(maxBuffered),
		// A partition refused for want of replicas waits for a metadata refresh before its next try; franz-go's
		// 5 s floor between refreshes would outlast the default produce timeout.
		kgo.MetadataMinAge(time.Second),
		kgo.WithLogger(logger{deps.Log.With().Str("sink", Type).Str("topic", st.topic).Logger()}),
	}
	if !st.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if st.sasl != nil {
		opts = append(opts, kgo.SASL(st.sasl))
	}
	if st.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(st.tls))
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, &sinks.OptionError{Sink: Type, Option: "brokers", Msg: "cannot configure the client: " + err.Error()}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &sink{settings: st, cl: cl, meta: message.Meta{Instance: deps.Instance}, ctx: ctx, cancel: cancel}, nil
}

type sink struct {
	settings
	cl   *kgo.Client
	meta message.Meta
	// ctx is what records are produced under: it ends only at Close (invariant 2 of the package doc).
	ctx       context.Context
	cancel    context.CancelFunc
	closed    atomic.Bool
	closeOnce sync.Once
}

func (s *sink) Durable() bool { return true }

// InlineMaxBytes is the largest body the sink carries inline (sinks.InlineLimiter).
func (s *sink) InlineMaxBytes() int { return s.inlineMax }

// Close fails the records still buffered (their attempts return an error) and closes the connections.
func (s *sink) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.cancel()
		s.cl.Close()
	})
	return nil
}

func (s *sink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	if s.closed.Load() {
		return sinks.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w from topic %s: %w", ErrNoAck, s.topic, err)
	}
	rec, err := s.record(e)
	if err != nil {
		return err
	}
	done := make(chan error, 1) // the promise never blocks the client's promise goroutine
	s.cl.TryProduce(s.ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	// The client checks a record's delivery timeout only between requests, and a refused request can be
	// followed by a metadata refresh seconds later: bound the wait here too.
	ctx, cancel := context.WithTimeout(ctx, s.produceTimeout)
	defer cancel()
	select {
	case err := <-done:
		return s.classify(err)
	case <-ctx.Done():
		return fmt.Errorf("%w from topic %s: %w", ErrNoAck, s.topic, ctx.Err())
	}
}

// record builds e's record. The value is a new buffer: the record may outlive Deliver (invariant 2), the
// envelope's body may not be retained.
func (s *sink) record(e *sinks.Envelope) (*kgo.Record, error) {
	if len(e.Body) > s.inlineMax && e.Claim == "" {
		return nil, sinks.Permanent(fmt.Errorf("%w: a body of %d bytes exceeds inline_max_bytes %d and was not checked in", ErrOversize, len(e.Body), s.inlineMax))
	}
	attrs := message.Attributes(e)
	hdrs := make([]kgo.RecordHeader, len(attrs))
	size := 0
	for i, a := range attrs {
		hdrs[i] = kgo.RecordHeader{Key: a.Name, Value: []byte(a.Value)}
		size += len(a.Name) + len(a.Value)
	}
	key := s.key.Append(nil, e)
	val := message.Encode(nil, e, s.meta)
	if size += len(key) + len(val); size > s.maxRecord {
		return nil, sinks.Permanent(fmt.Errorf("%w: %d bytes of key, value and headers exceed max_record_bytes %d", ErrOversize, size, s.maxRecord))
	}
	return &kgo.Record{Topic: s.topic, Key: key, Value: val, Headers: hdrs}, nil
}

// classify maps a produce result to the sink's answer: nil only for an acknowledged record.
func (s *sink) classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.CorruptMessage), errors.Is(err, kerr.InvalidRecord):
		return sinks.Permanent(fmt.Errorf("kafkasink: topic %s refused the record: %w", s.topic, err))
	case errors.Is(err, kgo.ErrMaxBuffered):
		return fmt.Errorf("%w: %d records already buffered for the cluster", ErrBusy, maxBuffered)
	case errors.Is(err, kgo.ErrClientClosed):
		return sinks.ErrClosed
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return fmt.Errorf("kafkasink: topic %s does not exist (the sink never creates topics): %w", s.topic, err)
	default:
		return fmt.Errorf("kafkasink: cannot produce to topic %s: %w", s.topic, err)
	}
}

// Logger hands franz-go's warnings and errors to l (never its debug chatter); the intake log's clients use it too.
func Logger(l zerolog.Logger) kgo.Logger { return logger{l} }

type logger struct{ l zerolog.Logger }

func (l logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	ev := l.l.Warn()
	if level == kgo.LogLevelError {
		ev = l.l.Error()
	}
	for i := 0; i+1 < len(keyvals); i += 2 {
		k, _ := keyvals[i].(string)
		ev = ev.Interface(k, keyvals[i+1])
	}
	ev.Msg(msg)
}
