package redissink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/capture"
	"github.com/ankusa-go/ankusa/test/leak"
	"github.com/ankusa-go/ankusa/test/services"
)

func TestMain(m *testing.M) { leak.VerifyTestMain(m) }

// subscriber is a real Redis subscriber on its own channel. It keeps every message it received, raw and
// decoded by hook id.
type subscriber struct {
	channel string
	ps      *redis.PubSub
	client  *redis.Client
	done    chan struct{}
	pongs   chan string

	mu   sync.Mutex
	raw  map[string][][]byte // nil: count only (benchmarks)
	n    int
	errs []error
}

// subscribe starts a subscriber on a fresh channel that keeps what it receives; the test's cleanup stops it.
func subscribe(t testing.TB) *subscriber { return subscribeKeeping(t, true) }

func subscribeKeeping(t testing.TB, keep bool) *subscriber {
	t.Helper()
	services.Require(t, "Redis", services.RedisAddr)
	c := redis.NewClient(&redis.Options{Addr: services.RedisAddr, DisableIdentity: true})
	sub := &subscriber{channel: "ankusa-test-" + uuid.NewString(), client: c, done: make(chan struct{}),
		pongs: make(chan string, 16)}
	if keep {
		sub.raw = make(map[string][][]byte)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sub.ps = c.Subscribe(ctx, sub.channel)
	if _, err := sub.ps.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatalf("cannot subscribe: %v", err)
	}
	go sub.run()
	t.Cleanup(func() {
		_ = sub.ps.Close()
		<-sub.done
		_ = c.Close()
	})
	return sub
}

func (sub *subscriber) run() {
	defer close(sub.done)
	for {
		v, err := sub.ps.Receive(context.Background())
		if err != nil {
			return // closed
		}
		switch m := v.(type) {
		case *redis.Message:
			if sub.raw == nil {
				sub.mu.Lock()
				sub.n++
				sub.mu.Unlock()
				continue
			}
			b := []byte(m.Payload)
			id := "?"
			if msg, err := message.Decode(b); err == nil {
				id = msg.ID
			} else {
				sub.mu.Lock()
				sub.errs = append(sub.errs, err)
				sub.mu.Unlock()
			}
			sub.mu.Lock()
			sub.raw[id] = append(sub.raw[id], b)
			sub.mu.Unlock()
		case *redis.Pong:
			sub.pongs <- m.Payload
		}
	}
}

// barrier returns once every message Redis pushed to the subscriber before now has been read: the PUBLISH
// that returned already wrote to the subscriber's connection, and a PING answer comes after it.
func (sub *subscriber) barrier(t testing.TB) {
	t.Helper()
	tag := uuid.NewString()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sub.ps.Ping(ctx, tag); err != nil {
		t.Fatalf("ping the subscriber: %v", err)
	}
	for {
		select {
		case p := <-sub.pongs:
			if p == tag {
				return
			}
		case <-ctx.Done():
			t.Fatal("the subscriber's pong never came")
		}
	}
}

func (sub *subscriber) messages(t testing.TB, id string) [][]byte {
	sub.barrier(t)
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if len(sub.errs) > 0 {
		t.Fatalf("the subscriber got a message Decode refuses: %v", sub.errs[0])
	}
	return sub.raw[id]
}

// target runs the conformance suite against a real Redis with a real subscriber.
type target struct{ sub *subscriber }

func newSink(t testing.TB, opts map[string]any) sinks.Sink {
	return sinktest.NewSink(t, New, Type, opts)
}

func (tg *target) New(t *testing.T) sinks.Sink { return tg.NewAt(t, services.RedisAddr) }
func (tg *target) NewAt(t *testing.T, addr string) sinks.Sink {
	// The suite sends 256 KiB bodies inline; the default threshold is the claim check's business.
	return newSink(t, map[string]any{"url": "redis://" + addr, "channel": tg.sub.channel, "inline_max_bytes": 1 << 20})
}
func (tg *target) Upstream() string { return services.RedisAddr }
func (tg *target) KeepsHooks() bool { return false }

// Broken publishes on a channel nobody listens to: no_subscribers must be retried, not dead-lettered.
func (tg *target) Broken(t *testing.T) sinks.Sink {
	return newSink(t, map[string]any{"url": "redis://" + services.RedisAddr, "channel": "ankusa-nobody-" + uuid.NewString()})
}

func (tg *target) Received(t *testing.T, id string) ([][]byte, bool) {
	return sinktest.ReceivedMessages(t, tg.sub.messages(t, id))
}

func TestConformance(t *testing.T) {
	sinktest.Run(t, &target{sub: subscribe(t)})
}

// Inventory D.2: "PUBLISH reached ≥1 subscriber" is the only nil; zero subscribers is no_subscribers,
// retried.
func TestNoSubscribersIsTransient(t *testing.T) {
	services.Require(t, "Redis", services.RedisAddr)
	s := newSink(t, map[string]any{"url": "redis://" + services.RedisAddr, "channel": "ankusa-nobody-" + uuid.NewString()})
	defer s.Close()
	err := s.Deliver(context.Background(), sinktest.Envelope([]byte("x")))
	if !errors.Is(err, ErrNoSubscribers) {
		t.Fatalf("Deliver = %v, want ErrNoSubscribers", err)
	}
	if cl, _ := sinks.Classify(err); cl != sinks.Transient || err.Error() != "redissink: no_subscribers" {
		t.Fatalf("no subscribers: %s %q", cl, err)
	}
}

// Inventory D.4: the subscriber receives exactly the Message v1 bytes, the same any transport sends.
func TestPublishesMessageV1(t *testing.T) {
	sub := subscribe(t)
	s := newSink(t, map[string]any{"url": "redis://" + services.RedisAddr, "channel": sub.channel})
	defer s.Close()
	e := sinktest.Envelope([]byte(`{"event":"push"}`))
	if err := s.Deliver(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	got := sub.messages(t, e.IDText)
	if want := message.Encode(nil, e, message.Meta{Instance: "n1"}); len(got) != 1 || string(got[0]) != string(want) {
		t.Fatalf("published %q, want %q", got, want)
	}
}

// Inventory D.5: a body over inline_max_bytes travels as its claim; without one the hook is refused as
// Permanent and nothing is published.
func TestInlineMaxBytes(t *testing.T) {
	sub := subscribe(t)
	s := newSink(t, map[string]any{"url": "redis://" + services.RedisAddr, "channel": sub.channel, "inline_max_bytes": 16})
	sinktest.InlineLimit(t, s, ErrInlineTooLarge, func(id string) [][]byte { return sub.messages(t, id) })
}

// Option problems name the option, never its value (the URL may hold a password).
func TestOptions(t *testing.T) {
	for name, c := range map[string]struct {
		opts map[string]any
		want string
	}{
		"no url":         {map[string]any{"channel": "c"}, "redis sink: url: is required"},
		"http url":       {map[string]any{"url": "http://hunter2@x:6379", "channel": "c"}, "redis sink: url: must be a redis:// or rediss:// URL"},
		"bad db":         {map[string]any{"url": "redis://:hunter2@x:6379/notadb", "channel": "c"}, "redis sink: url: is not a URL Redis accepts"},
		"no channel":     {map[string]any{"url": "redis://x:6379"}, "redis sink: channel: is required"},
		"inline":         {map[string]any{"url": "redis://x", "channel": "c", "inline_max_bytes": -1}, "redis sink: inline_max_bytes: must be in"},
		"timeout":        {map[string]any{"url": "redis://x", "channel": "c", "publish_timeout_ms": 0}, "redis sink: publish_timeout_ms: must be in"},
		"unknown option": {map[string]any{"url": "redis://x", "channel": "c", "passwd": "hunter2"}, "redis sink: passwd: unknown option"},
	} {
		t.Run(name, func(t *testing.T) { sinktest.RefusesOptions(t, New, Type, c.opts, c.want) })
	}
	s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{"url": "rediss://u:p@x:6380/2", "channel": "c"}}, sinks.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.(*sink).settings; st.inlineMax != DefaultInlineMaxBytes || st.timeout != DefaultPublishTimeout ||
		st.opts.TLSConfig == nil || st.opts.DB != 2 || strings.Contains(st.target, "p@") || s.Durable() {
		t.Fatalf("defaults: %+v", st)
	}
}

// An error names the target without its password.
func TestErrorsDoNotLeakThePassword(t *testing.T) {
	s := newSink(t, map[string]any{"url": "redis://user:hunter2@127.0.0.1:1", "channel": "c", "publish_timeout_ms": 500})
	defer s.Close()
	err := s.Deliver(context.Background(), sinktest.Envelope([]byte("x")))
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Deliver = %v", err)
	}
	if cl, _ := sinks.Classify(err); cl != sinks.Transient {
		t.Fatalf("unreachable Redis: %s", cl)
	}
}

// STYLE: zerolog structured logs. go-redis's own lines reach the instance's logger at debug level instead of
// stderr, and carry no password.
func TestBridgeClientLog(t *testing.T) {
	var buf capture.Buffer
	BridgeClientLog(zerolog.New(&buf).Level(zerolog.DebugLevel))
	defer BridgeClientLog(zerolog.Nop())
	s := newSink(t, map[string]any{"url": "redis://user:hunter2@127.0.0.1:1", "channel": "c", "publish_timeout_ms": 500})
	defer s.Close()
	if err := s.Deliver(context.Background(), sinktest.Envelope([]byte("x"))); err == nil {
		t.Fatal("delivered to a closed port")
	}
	var found bool
	for _, l := range buf.Lines(t) {
		if l["component"] == "go-redis" && l["level"] == "debug" && strings.Contains(fmt.Sprint(l["message"]), "dial") {
			found = true
		}
	}
	if !found || strings.Contains(buf.String(), "hunter2") {
		t.Fatalf("go-redis lines not bridged (or leaking the password): %s", buf.String())
	}
}
