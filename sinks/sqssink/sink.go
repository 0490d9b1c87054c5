package sqssink

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
)

// Register adds the sqs sink to r.
func Register(r *sinks.Registry) { r.Register(Type, New) }

// New builds an sqs sink from its config entry (a sinks.Factory). It reads the AWS configuration (environment
// and shared files, for the region and the default credential chain) but makes no request: credentials are
// resolved, and the queue reached, on the first Deliver.
func New(spec config.SinkSpec, deps sinks.Deps) (sinks.Sink, error) {
	st, err := parse(spec)
	if err != nil {
		return nil, err
	}
	load := []func(*awsconfig.LoadOptions) error{
		// One Deliver is one SendMessage: dispatch owns the retry schedule, the back-off and the breaker,
		// which an SDK retrying inside the attempt would hide throttling from.
		awsconfig.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if st.region != "" {
		load = append(load, awsconfig.WithRegion(st.region))
	}
	if c := st.static; c != nil {
		load = append(load, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(c.id, c.secret, c.session)))
	}
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), load...)
	if err != nil {
		return nil, fmt.Errorf("sqssink: cannot load the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, &sinks.OptionError{Sink: Type, Option: "region", Msg: "is required: queue_url names no region and the AWS environment sets none"}
	}
	// The SDK's own transport carries what the environment configured (AWS_CA_BUNDLE, proxies); the sink
	// keeps it to size its pool and to drop idle connections on Close.
	var tr *http.Transport
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr = bc.GetTransport()
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64 // a lane runs attempts concurrently against one endpoint; keep them warm
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.HTTPClient = &http.Client{Transport: tr}
		if st.endpoint != "" {
			o.BaseEndpoint = aws.String(st.endpoint)
		}
		// The sink compares MD5OfMessageBody itself, so a mismatch is ErrChecksum rather than an SDK string.
		o.DisableMessageChecksumValidation = true
	})
	return &sink{settings: st, client: client, transport: tr, meta: message.Meta{Instance: deps.Instance}}, nil
}

type sink struct {
	settings
	client    *sqs.Client
	transport *http.Transport
	meta      message.Meta
	closed    atomic.Bool
	bufs      sync.Pool // *[]byte encode buffers
}

func (s *sink) Durable() bool { return true }

// InlineMaxBytes is inline_max_bytes (sinks.InlineLimiter): a longer body must arrive checked in.
func (s *sink) InlineMaxBytes() int { return s.inline }

// Close drops idle connections; in-flight attempts finish on their own.
func (s *sink) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.transport.CloseIdleConnections()
	}
	return nil
}

func (s *sink) Deliver(ctx context.Context, e *sinks.Envelope) error {
	if s.closed.Load() {
		return sinks.ErrClosed
	}
	in, err := s.input(e)
	if err != nil {
		return err
	}
	sum := md5.Sum([]byte(*in.MessageBody))

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.SendMessage(ctx, in)
	if s.closed.Load() { // closed mid-attempt: do not leave this attempt's connection idling
		s.transport.CloseIdleConnections()
	}
	if err != nil {
		return classify(fmt.Errorf("sqssink: cannot send to %s: %w", s.target, err), time.Now())
	}
	if out.MD5OfMessageBody == nil || !strings.EqualFold(*out.MD5OfMessageBody, hex.EncodeToString(sum[:])) {
		return fmt.Errorf("%w (queue %s, message id %s)", ErrChecksum, s.target, aws.ToString(out.MessageId))
	}
	return nil
}

// input builds the SendMessage request for e. What no retry can send is refused here as Permanent.
func (s *sink) input(e *sinks.Envelope) (*sqs.SendMessageInput, error) {
	if e.Claim == "" && len(e.Body) > s.inline {
		return nil, sinks.Permanent(fmt.Errorf("%w: %d bytes, inline_max_bytes %d", ErrNeedsClaim, len(e.Body), s.inline))
	}
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	buf := message.Encode((*bp)[:0], e, s.meta)
	body := string(buf) // the SDK takes a string; the buffer goes back to the pool
	*bp = buf
	s.bufs.Put(bp)

	attrs := message.Attributes(e)
	size := len(body)
	in := &sqs.SendMessageInput{
		QueueUrl:          &s.queueURL,
		MessageBody:       &body,
		MessageAttributes: make(map[string]types.MessageAttributeValue, len(attrs)),
	}
	for _, a := range attrs {
		in.MessageAttributes[a.Name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(a.Value)}
		size += len(a.Name) + len("String") + len(a.Value) // SQS counts attributes into the message size
	}
	if size > s.maxBytes {
		return nil, sinks.Permanent(fmt.Errorf("%w: %d bytes, max_message_bytes %d", ErrTooLarge, size, s.maxBytes))
	}
	if s.fifo {
		dedupe := e.Text()
		if e.ReplayID != "" {
			dedupe += ":replay:" + e.ReplayID
		}
		group := s.group
		if group == "" {
			tenant := e.Tenant
			if tenant == "" {
				tenant = sinks.DefaultTenant
			}
			group = tenant + "/" + e.Source
		}
		in.MessageDeduplicationId = aws.String(fitID(dedupe))
		in.MessageGroupId = aws.String(fitID(group))
	}
	return in, nil
}

// fitID returns id when SQS can carry it as a group or deduplication id, else the hex SHA-256 of it: as
// stable across retries, and within the 128 characters of !-~ SQS allows.
func fitID(id string) string {
	if validAttrID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// classify places a failed SendMessage in its class (package doc). err wraps the SDK's error.
func classify(err error, now time.Time) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch code := shortCode(api.ErrorCode()); code {
		case "InvalidMessageContents", "InvalidParameterValue":
			return sinks.Permanent(err)
		}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		if d, ok := retryAfter(re.Response.Header.Get("Retry-After"), now); ok {
			return sinks.RetryAfter(d, err)
		}
	}
	return err // throttling, 5xx, a missing queue, credentials, the network: Transient
}

// shortCode strips the namespaces an error code may carry ("AWS.SimpleQueueService.InvalidParameterValue",
// "com.amazonaws.sqs#InvalidParameterValue"), as the query-compatible and JSON protocols spell it.
func shortCode(code string) string {
	if i := strings.LastIndexAny(code, ".#"); i >= 0 {
		return code[i+1:]
	}
	return code
}

// retryAfter reads Retry-After as delay-seconds or an HTTP date; the delay is clamped by sinks.RetryAfter.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
