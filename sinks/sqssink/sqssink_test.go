package sqssink

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// testCreds are goaws's: it checks no signature, but the sink must sign with something, and the default
// chain would reach for the instance metadata address, which a test never contacts.
var testCreds = map[string]any{"access_key_id": "test", "secret_access_key": "test-secret-never-printed"}

func newSink(t testing.TB, opts map[string]any) sinks.Sink {
	t.Helper()
	if _, ok := opts["endpoint"]; !ok {
		opts["endpoint"] = goawsURL
	}
	if _, ok := opts["credentials"]; !ok {
		opts["credentials"] = testCreds
	}
	return sinktest.NewSink(t, New, Type, opts)
}

// target runs the conformance suite against a goaws queue: Received reads what the queue holds (Held),
// decodes each Message v1 once and files its body under the hook id it names.
type target struct {
	queue string
	seen  int // messages of Held already filed; the queue is only appended to here
	filed sinktest.Filed
}

func (tg *target) New(t *testing.T) sinks.Sink {
	// The suite sends bodies up to 256 KiB without a claim: inline_max_bytes is raised to let them through.
	return newSink(t, map[string]any{"queue_url": tg.queue, "inline_max_bytes": 300_000})
}

func (tg *target) Received(t *testing.T, id string) ([][]byte, bool) {
	held := Held(tg.queue)
	for _, body := range held[tg.seen:] {
		tg.filed.Add(t, []byte(body))
	}
	tg.seen = len(held)
	return tg.filed.Received(id)
}

func (tg *target) Broken(t *testing.T) sinks.Sink {
	// A queue nobody created: the sink never creates one, and an outage of this kind must be retried.
	s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{
		"queue_url": goawsURL + "/100010001000/never-created", "endpoint": goawsURL, "credentials": testCreds,
	}}, sinks.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	c := NewConsumer(t)
	q := c.CreateQueue(t, "conformance", map[string]string{"MaximumMessageSize": "1048576"})
	sinktest.Run(t, &target{queue: q})
}

// Inventory D.4: the queue sinks send Message v1 with the broker attribute set beside it; a consumer decodes
// the byte-exact body.
func TestConsumerReadsMessageV1WithAttributes(t *testing.T) {
	c := NewConsumer(t)
	q := c.CreateQueue(t, "message", nil)
	s := newSink(t, map[string]any{"queue_url": q})
	body := sinktest.Binary(4096)
	e := sinktest.Envelope(body)
	e.ReplayID = "r1"
	if err := sinktest.Deliver(s, e, 10*time.Second); err != nil {
		t.Fatalf("Deliver = %v", err)
	}
	msgs := c.Drain(t, q)
	if len(msgs) != 1 {
		t.Fatalf("queue holds %d messages, want 1", len(msgs))
	}
	raw := []byte(aws.ToString(msgs[0].Body))
	if want := message.Encode(nil, e, message.Meta{Instance: "n1"}); !bytes.Equal(raw, want) {
		t.Fatalf("message body is not message.Encode of the envelope:\n got %.200s\nwant %.200s", raw, want)
	}
	m, err := message.Decode(raw)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !bytes.Equal(m.Body(), body) || m.ID != e.IDText || m.ReplayID != "r1" || m.Instance != "n1" {
		t.Fatalf("decoded id %s replay %q instance %q, body equal %v", m.ID, m.ReplayID, m.Instance, bytes.Equal(m.Body(), body))
	}
	want := message.Attributes(e)
	if len(msgs[0].MessageAttributes) != len(want) {
		t.Fatalf("got %d attributes, want %d (%v)", len(msgs[0].MessageAttributes), len(want), want)
	}
	for _, a := range want {
		got, ok := msgs[0].MessageAttributes[a.Name]
		if !ok || aws.ToString(got.StringValue) != a.Value || aws.ToString(got.DataType) != "String" {
			t.Fatalf("attribute %s = %+v, want String %q", a.Name, got, a.Value)
		}
	}
}

// Inventory D.2: ".fifo → MessageDeduplicationId = id (or id:replay:<rid>)": a retried hook is stored once,
// its replay once more.
func TestFIFODeduplicatesRetriesButNotReplays(t *testing.T) {
	c := NewConsumer(t)
	q := c.CreateQueue(t, "dedupe.fifo", map[string]string{"FifoQueue": "true"})
	s := newSink(t, map[string]any{"queue_url": q})
	e := sinktest.Envelope([]byte(`{"n":1}`))
	for i := 0; i < 2; i++ { // the same hook, attempted twice
		if err := sinktest.Deliver(s, e, 10*time.Second); err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
	}
	replay := *e
	replay.ReplayID = "rp-7"
	if err := sinktest.Deliver(s, &replay, 10*time.Second); err != nil {
		t.Fatalf("replay: %v", err)
	}
	var got []string
	for range 3 { // a FIFO group hands out one message at a time
		for _, m := range c.Drain(t, q) {
			dec, err := message.Decode([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, dec.ID+"/"+dec.ReplayID)
			if g := m.Attributes["MessageGroupId"]; g != "" && g != "acme/sinktest" {
				t.Fatalf("MessageGroupId = %q, want acme/sinktest", g)
			}
		}
	}
	want := []string{e.IDText + "/", e.IDText + "/rp-7"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("queue delivered %v, want %v", got, want)
	}
}

func TestFIFOIDs(t *testing.T) {
	s := &sink{settings: settings{queueURL: "http://x/1/q.fifo", fifo: true, inline: 1 << 20, maxBytes: 1 << 20}}
	e := sinktest.Envelope([]byte("x"))
	e.Tenant = ""
	e.ReplayID = strings.Repeat("r", 200)
	in, err := s.input(e)
	if err != nil {
		t.Fatal(err)
	}
	if g := aws.ToString(in.MessageGroupId); g != "default/sinktest" {
		t.Fatalf("group id %q, want default/sinktest (tenant default when none)", g)
	}
	if d := aws.ToString(in.MessageDeduplicationId); !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(d) {
		t.Fatalf("a dedupe id over 128 characters went out as %q, want its sha256", d)
	}
	s.group = "fixed"
	if in, _ = s.input(e); aws.ToString(in.MessageGroupId) != "fixed" {
		t.Fatalf("message_group_id ignored: %q", aws.ToString(in.MessageGroupId))
	}
	s.fifo = false
	if in, _ = s.input(e); in.MessageGroupId != nil || in.MessageDeduplicationId != nil {
		t.Fatal("a standard queue got FIFO ids")
	}
}

// Inventory D.2 "Permanent failures": oversize is refused before sending; the service's own refusal
// (goaws answers InvalidParameterValue for a message over the queue's MaximumMessageSize) is Permanent too.
func TestOversizeIsPermanent(t *testing.T) {
	c := NewConsumer(t)
	q := c.CreateQueue(t, "oversize", map[string]string{"MaximumMessageSize": "2048"})

	s := newSink(t, map[string]any{"queue_url": q, "max_message_bytes": 2048})
	err := sinktest.Deliver(s, sinktest.Envelope(sinktest.Binary(1600)), 10*time.Second)
	if cl, _ := sinks.Classify(err); !errors.Is(err, ErrTooLarge) || cl != sinks.PermanentClass {
		t.Fatalf("a message over max_message_bytes: %v (%s), want permanent ErrTooLarge", err, cl)
	}
	if err := sinktest.Deliver(s, sinktest.Envelope(sinktest.Binary(100)), 10*time.Second); err != nil {
		t.Fatalf("a message under the limit: %v", err)
	}

	big := newSink(t, map[string]any{"queue_url": q}) // the sink allows 1 MiB, the queue 2 KiB
	err = sinktest.Deliver(big, sinktest.Envelope(sinktest.Binary(4000)), 10*time.Second)
	if cl, _ := sinks.Classify(err); cl != sinks.PermanentClass {
		t.Fatalf("the queue refused the size: %v (%s), want permanent", err, cl)
	}
	if n := len(c.Drain(t, q)); n != 1 {
		t.Fatalf("queue holds %d messages, want only the one under the limit", n)
	}
}

// sinks.InlineLimiter: a body over inline_max_bytes travels by claim; without one the sink refuses it.
func TestBodyOverInlineMaxTravelsByClaim(t *testing.T) {
	c := NewConsumer(t)
	q := c.CreateQueue(t, "claim", nil)
	s := newSink(t, map[string]any{"queue_url": q, "inline_max_bytes": 16})
	sinktest.InlineLimit(t, s, ErrNeedsClaim, func(id string) [][]byte {
		var held [][]byte
		for _, b := range Held(q) {
			held = append(held, []byte(b))
		}
		return sinktest.OfHook(t, id, held)
	})
}

// Invariant: nil only with a matching MD5OfMessageBody. A proxy in front of goaws rewrites the digest.
func TestChecksumMismatchIsTransient(t *testing.T) {
	c := NewConsumer(t)
	q := c.CreateQueue(t, "md5", nil)
	u, _ := url.Parse(goawsURL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		b = regexp.MustCompile(`"MD5OfMessageBody":"[0-9a-f]+"`).ReplaceAll(b, []byte(`"MD5OfMessageBody":"00000000000000000000000000000000"`))
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Del("Content-Length")
		return nil
	}
	proxy := httptest.NewServer(rp)
	defer proxy.Close()
	s := newSink(t, map[string]any{"queue_url": q, "endpoint": proxy.URL})
	err := sinktest.Deliver(s, sinktest.Envelope([]byte("x")), 10*time.Second)
	if cl, _ := sinks.Classify(err); !errors.Is(err, ErrChecksum) || cl != sinks.Transient {
		t.Fatalf("rewritten digest: %v (%s), want transient ErrChecksum", err, cl)
	}
	_ = s.Close() // its connection to the proxy, before the proxy closes
}

// Inventory D.2: InvalidMessageContents and InvalidParameterValue are Permanent; throttling and 5xx are
// retried, after Retry-After when the service sends one; a missing queue is retried.
func TestServiceErrorClasses(t *testing.T) {
	type answer struct {
		status     int
		code       string
		retryAfter string
	}
	var cur answer
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		a := cur
		mu.Unlock()
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-Query-Error", a.code+";Sender")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.sqs#`+a.code+`","message":"refused"}`)
	}))
	defer srv.Close()
	s := newSink(t, map[string]any{"queue_url": srv.URL + "/1/q", "endpoint": srv.URL})
	f := func(a answer, want sinks.Class, wantDelay time.Duration) {
		t.Helper()
		mu.Lock()
		cur = a
		mu.Unlock()
		err := sinktest.Deliver(s, sinktest.Envelope([]byte("x")), 10*time.Second)
		cl, d := sinks.Classify(err)
		if err == nil || cl != want || d != wantDelay {
			t.Fatalf("%d %s (Retry-After %q): %v classified %s %s, want %s %s", a.status, a.code, a.retryAfter, err, cl, d, want, wantDelay)
		}
		if strings.Contains(err.Error(), "test-secret-never-printed") {
			t.Fatalf("error carries the secret access key: %v", err)
		}
	}
	f(answer{400, "InvalidMessageContents", ""}, sinks.PermanentClass, 0)
	f(answer{400, "InvalidParameterValue", ""}, sinks.PermanentClass, 0)
	f(answer{400, "QueueDoesNotExist", ""}, sinks.Transient, 0)
	f(answer{400, "AccessDenied", ""}, sinks.Transient, 0)
	f(answer{400, "RequestThrottled", ""}, sinks.Transient, 0)
	f(answer{503, "ServiceUnavailable", "7"}, sinks.RetryAfterClass, 7*time.Second)
	f(answer{500, "InternalFailure", ""}, sinks.Transient, 0)
	_ = s.Close()
}

func TestOptions(t *testing.T) {
	f := func(opts map[string]any, want ...string) {
		t.Helper()
		sinktest.RefusesOptions(t, New, Type, opts, want...)
	}
	f(map[string]any{}, "sqs sink: queue_url: is required")
	f(map[string]any{"queue_url": "sqs.eu-west-1.amazonaws.com/1/q"}, "queue_url: must be an absolute http(s) URL")
	f(map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/"}, "queue_url: must name a queue")
	f(map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "message_group_id": "g"}, "message_group_id: applies to FIFO queues only")
	f(map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "credentials": map[string]any{"access_key_id": "AK"}},
		"credentials.secret_access_key: is required")
	f(map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "credentials": map[string]any{"secret_access_key": sinktest.Secret, "token": sinktest.Secret}},
		"credentials.access_key_id: is required", "credentials.token: unknown option")
	f(map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "inline_max_bytes": 2_000_000}, "inline_max_bytes: must be in 0..1048576")
	f(map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q", "queue": "x"}, "queue: unknown option")
	// Accepted: NewSink fails the test on an error.
	sinktest.NewSink(t, New, Type, map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q.fifo", "message_group_id": "g", "timeout_ms": 100, "credentials": map[string]any{"access_key_id": "AK", "secret_access_key": sinktest.Secret}})
	sinktest.NewSink(t, New, Type, map[string]any{"queue_url": "http://127.0.0.1:1/1/q", "endpoint": "http://127.0.0.1:1"})
}

func TestRegionOf(t *testing.T) {
	for host, want := range map[string]string{
		"sqs.eu-west-1.amazonaws.com":     "eu-west-1",
		"sqs.cn-north-1.amazonaws.com.cn": "cn-north-1",
		"us-east-2.queue.amazonaws.com":   "us-east-2",
		"sqs.us-east-1.amazonaws.com:443": "us-east-1",
		"localhost:4566":                  "",
		"sqs.example.com":                 "",
	} {
		if got := regionOf(host); got != want {
			t.Errorf("regionOf(%q) = %q, want %q", host, got, want)
		}
	}
}
