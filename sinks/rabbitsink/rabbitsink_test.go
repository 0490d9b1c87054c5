package rabbitsink

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/test/services"
)

type target struct{ b *broker }

func (tg *target) New(t *testing.T) sinks.Sink {
	// The suite sends bodies up to 256 KiB inline: raise inline_max_bytes past them (no claim check here).
	return tg.b.sink(t, tg.b.url, map[string]any{"inline_max_bytes": 1 << 20})
}

func (tg *target) Received(t *testing.T, id string) ([][]byte, bool) {
	return sinktest.ReceivedMessages(t, tg.b.payloads(id))
}

func (tg *target) Broken(t *testing.T) sinks.Sink {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return tg.b.sink(t, urlAt(addr), nil)
}

func (tg *target) Upstream() string { return services.RabbitMQAddr }

func (tg *target) NewAt(t *testing.T, addr string) sinks.Sink {
	return tg.b.sink(t, urlAt(addr), map[string]any{"retry_ms": 1000})
}

// KeepsHooks: a confirmed persistent message stays in its queue until consumed.
func (tg *target) KeepsHooks() bool { return true }

func TestConformance(t *testing.T) {
	sinktest.Run(t, &target{b: newBroker(t)})
}

// Inventory D.2/D.4: a consumer gets Message v1 (body byte-exact), persistent, message_id = hook id,
// content_type application/json, AMQP headers = the broker header set, routing key ankusa.<source_id>.
func TestConsumerGetsMessageV1(t *testing.T) {
	b := newBroker(t)
	s := b.sink(t, b.url, nil)
	body := sinktest.Binary(2048)
	e := sinktest.Envelope(body)
	e.ReplayID = "rp-7"
	if err := sinktest.Deliver(s, e, attempt); err != nil {
		t.Fatal(err)
	}
	ds := b.deliveries(e.IDText)
	if len(ds) != 1 {
		t.Fatalf("%d messages for the hook, want 1", len(ds))
	}
	d := ds[0]
	if want := message.Encode(nil, e, message.Meta{Instance: "n1"}); !bytes.Equal(d.Body, want) {
		t.Fatalf("body is not message.Encode's bytes:\n got %s\nwant %s", d.Body, want)
	}
	m, err := message.Decode(d.Body)
	if err != nil || !bytes.Equal(m.Body(), body) {
		t.Fatalf("decode: %v, body equal %v", err, err == nil && bytes.Equal(m.Body(), body))
	}
	if d.MessageId != e.IDText || d.ContentType != "application/json" || d.DeliveryMode != 2 || d.RoutingKey != "ankusa.sinktest" {
		t.Fatalf("properties: message_id %q content_type %q delivery_mode %d routing_key %q",
			d.MessageId, d.ContentType, d.DeliveryMode, d.RoutingKey)
	}
	if d.Timestamp.UnixMilli()/1000 != e.ReceivedAt/1000 {
		t.Fatalf("timestamp %v, received_at %d", d.Timestamp, e.ReceivedAt)
	}
	want := message.Attributes(e)
	if len(d.Headers) != len(want) {
		t.Fatalf("headers %v, want %v", d.Headers, want)
	}
	for _, a := range want {
		if got, _ := d.Headers[a.Name].(string); got != a.Value {
			t.Fatalf("header %s = %v, want %q", a.Name, d.Headers[a.Name], a.Value)
		}
	}
}

// Inventory D.2: "≥1 queue bound"; test-services: an unroutable mandatory message is returned *and* acked.
// Deleting the queue makes every attempt unroutable (retried, never nil); binding one again delivers.
func TestUnroutableIsRetriedUntilAQueueIsBound(t *testing.T) {
	b := newBroker(t)
	s := b.sink(t, b.url, nil)
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("routed")), attempt); err != nil {
		t.Fatal(err)
	}
	b.deleteQueue()
	e := sinktest.Envelope([]byte("while no queue is bound"))
	for i := 0; i < 20; i++ { // many: a return overtaken by its ack even once would show as nil
		err := sinktest.Deliver(s, e, attempt)
		if !errors.Is(err, ErrUnroutable) {
			t.Fatalf("attempt %d with no queue bound = %v, want unroutable", i, err)
		}
		if cl, _ := sinks.Classify(err); cl != sinks.Transient {
			t.Fatalf("unroutable classified %s", cl)
		}
	}
	b.declareQueue()
	if err := sinktest.Deliver(s, e, attempt); err != nil {
		t.Fatalf("after the queue is bound again: %v", err)
	}
	if got, err := b.bodies(e.IDText); err != nil || len(got) != 1 || !bytes.Equal(got[0], e.Body) {
		t.Fatalf("after rebinding: %d copies (err %v), want the body once", len(got), err)
	}
}

// Concurrent attempts, half of them unroutable (a routing key no queue binds): each gets its own answer,
// none is confused by another's return.
func TestReturnsAreMatchedToTheirAttempts(t *testing.T) {
	b := newBroker(t)
	routed := b.sink(t, b.url, nil)
	lost := b.sink(t, b.url, map[string]any{"routing_key": "nowhere.{source_id}"})
	type res struct {
		unroutable bool
		err        error
	}
	const n = 64
	out := make(chan res, n)
	for i := 0; i < n; i++ {
		s := routed
		if i%2 == 1 {
			s = lost
		}
		go func() {
			out <- res{s == lost, sinktest.Deliver(s, sinktest.Envelope([]byte("x")), attempt)}
		}()
	}
	for i := 0; i < n; i++ {
		r := <-out
		if r.unroutable && !errors.Is(r.err, ErrUnroutable) {
			t.Errorf("an unroutable attempt returned %v", r.err)
		}
		if !r.unroutable && r.err != nil {
			t.Errorf("a routed attempt returned %v", r.err)
		}
	}
}

// A publish to an exchange that does not exist makes the broker close the channel (404): the attempt fails
// with channel_closed, not as permanent, and the sink reopens its channel for the next attempt.
func TestMissingExchangeClosesTheChannelAndIsRetried(t *testing.T) {
	b := newBroker(t)
	s := b.sink(t, b.url, map[string]any{"exchange": "ankusa-test-absent-" + b.queue})
	err := sinktest.Deliver(s, sinktest.Envelope([]byte("x")), attempt)
	if !errors.Is(err, ErrChannelClosed) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("publish to a missing exchange = %v, want channel_closed naming 404", err)
	}
	if cl, _ := sinks.Classify(err); cl == sinks.PermanentClass {
		t.Fatalf("a missing exchange classified permanent")
	}
	good := b.sink(t, b.url, nil)
	if err := sinktest.Deliver(good, sinktest.Envelope([]byte("y")), attempt); err != nil {
		t.Fatal(err)
	}
	// The same sink keeps failing the same way (it reopened its channel), never wedges into not_connected
	// for good.
	poll.Eventually(t, 10*time.Second, func() error {
		if err := sinktest.Deliver(s, sinktest.Envelope([]byte("z")), attempt); !errors.Is(err, ErrChannelClosed) {
			return errors.New("not yet channel_closed again: " + err.Error())
		}
		return nil
	})
}

// max_inflight bounds the attempts waiting for confirms: past it, busy at once.
func TestBusyPastMaxInflight(t *testing.T) {
	b := newBroker(t)
	s := b.sink(t, b.url, map[string]any{"max_inflight": 1})
	s.inflight <- struct{}{} // one attempt waiting
	err := sinktest.Deliver(s, sinktest.Envelope([]byte("x")), attempt)
	<-s.inflight
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("Deliver past max_inflight = %v, want busy", err)
	}
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("x")), attempt); err != nil {
		t.Fatal(err)
	}
}

// The path to the broker is cut while attempts are in flight: every attempt ends with an error (never nil
// for a publish whose confirm was lost), then the sink reconnects by itself and the hook is delivered.
func TestSeverMidFlightReconnectsAndLosesNothing(t *testing.T) {
	b := newBroker(t)
	p := sinktest.NewProxy(t, services.RabbitMQAddr)
	s := b.sink(t, urlAt(p.Addr()), map[string]any{"retry_ms": 500})
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("warm")), attempt); err != nil {
		t.Fatal(err)
	}
	const n = 32
	type res struct {
		e   *sinks.Envelope
		err error
	}
	out := make(chan res, n)
	for i := 0; i < n; i++ {
		e := sinktest.Envelope([]byte("in flight"))
		go func() { out <- res{e, sinktest.Deliver(s, e, attempt)} }()
	}
	p.Sever()
	var failed []*sinks.Envelope
	for i := 0; i < n; i++ {
		r := <-out
		if r.err != nil {
			if cl, _ := sinks.Classify(r.err); cl == sinks.PermanentClass {
				t.Fatalf("a severed attempt classified permanent: %v", r.err)
			}
			failed = append(failed, r.e)
		} else if got := b.deliveries(r.e.IDText); len(got) == 0 {
			t.Fatalf("Deliver returned nil but the queue has nothing for %s", r.e.IDText)
		}
	}
	t.Logf("%d of %d attempts in flight failed at the cut", len(failed), n)
	// Dispatch retries the failed ones: each is delivered once the sink reconnected.
	for _, e := range failed {
		poll.Eventually(t, 15*time.Second, func() error { return sinktest.Deliver(s, e, 2*time.Second) })
		if len(b.deliveries(e.IDText)) == 0 {
			t.Fatalf("retried %s: nil but not in the queue", e.IDText)
		}
	}
}

// Close ends the connection loop even while the broker is unreachable, and a closed sink never delivers.
func TestCloseWhileReconnecting(t *testing.T) {
	b := newBroker(t)
	p := sinktest.NewProxy(t, services.RabbitMQAddr)
	s := b.sink(t, urlAt(p.Addr()), nil)
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("x")), attempt); err != nil {
		t.Fatal(err)
	}
	p.Pause()
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("y")), time.Second); err == nil {
		t.Fatal("Deliver returned nil with the broker unreachable")
	}
	done := make(chan struct{})
	go func() { _ = s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while the sink was reconnecting")
	}
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("z")), time.Second); !errors.Is(err, sinks.ErrClosed) {
		t.Fatalf("Deliver after Close = %v, want ErrClosed", err)
	}
}

// Building a sink never dials: check-config builds every sink of a config.
func TestNewDoesNotConnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{"url": urlAt(l.Addr().String()), "exchange": "x"}}, sinks.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	select {
	case <-accepted:
		t.Fatal("New (or Close) connected to the broker")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestOptionsAreValidated(t *testing.T) {
	f := func(opts map[string]any, wants ...string) {
		t.Helper()
		sinktest.RefusesOptions(t, New, Type, opts, wants...)
	}
	f(map[string]any{}, "rabbitmq sink: url: is required", "rabbitmq sink: exchange: is required")
	f(map[string]any{"url": "http://u:" + sinktest.Secret + "@h/", "exchange": "x"}, "url: must be an amqp:// or amqps:// URL")
	f(map[string]any{"url": "amqp://h/", "exchange": "x", "exchange_type": "x-consistent-hash"}, "exchange_type: must be one of topic|direct|fanout|headers")
	f(map[string]any{"url": "amqp://h/", "exchange": "x", "routing_key": "{bad}"}, "routing_key: placeholders")
	f(map[string]any{"url": "amqp://h/", "exchange": "x", "max_inflight": 0, "declare": true}, "max_inflight: must be in", "declare: unknown option")
	st, err := parse(config.SinkSpec{Type: Type, Options: map[string]any{"url": "amqp://u:hunter2@h/", "exchange": ""}})
	if err != nil {
		t.Fatal(err)
	}
	if st.exchangeType != "topic" || st.inlineMax != 65536 || st.maxInflight != 256 || st.confirmTimeout != 5*time.Second ||
		st.retry != 5*time.Second || strings.Contains(st.target, "hunter2") {
		t.Fatalf("defaults: %+v", st)
	}
	if got := string(st.routingKey.Append(nil, &sinks.Envelope{Source: "gh"})); got != "ankusa.gh" {
		t.Fatalf("default routing key %q", got)
	}
}

// A body over inline_max_bytes without a claim can never be carried: permanent, nothing published. With a
// claim it travels as the ref (inventory D.5).
func TestOversizeIsPermanent(t *testing.T) {
	b := newBroker(t)
	sinktest.InlineLimit(t, b.sink(t, b.url, map[string]any{"inline_max_bytes": 16}), ErrOversize, b.payloads)
}

// While the broker blocks publishers (a resource alarm: connection.blocked) a socket write may never return,
// so Deliver refuses at once, publishing nothing, and delivers again once unblocked. The alarm is simulated:
// raising a real one would stop every publisher of the machine's shared broker.
func TestBlockedBrokerRefusesAtOnce(t *testing.T) {
	b := newBroker(t)
	s := b.sink(t, b.url, nil)
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("warm")), attempt); err != nil {
		t.Fatal(err)
	}
	reason := "low on memory"
	s.blocked.Store(&reason)
	e := sinktest.Envelope([]byte("blocked"))
	if err := sinktest.Deliver(s, e, attempt); !errors.Is(err, ErrPublishFailed) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("Deliver while blocked = %v, want publish_failed naming the reason", err)
	}
	if len(b.deliveries(e.IDText)) != 0 {
		t.Fatal("published while the broker blocks publishing")
	}
	s.blocked.Store(nil)
	if err := sinktest.Deliver(s, e, attempt); err != nil {
		t.Fatal(err)
	}
}
