package sinktest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ankusa-go/ankusa/sinks"
)

// Target lets the suite observe what reached the destination.
type Target interface {
	// New returns a sink pointing at a working destination. The suite closes it.
	New(t *testing.T) sinks.Sink
	// Received returns the bodies the destination got for hook id (nil, false if none). It is called right
	// after Deliver returned nil, without polling: nil must mean the destination has it.
	Received(t *testing.T, id string) ([][]byte, bool)
	// Broken returns a sink whose destination refuses or is unreachable, or nil for a sink that cannot fail
	// (the log sink): the case is then skipped.
	Broken(t *testing.T) sinks.Sink
}

// MetadataOnly is implemented by a Target whose destination keeps the hook's size but not its bytes (the log
// sink): Received then returns one zero-filled body of the delivered size per delivery, and the suite compares
// sizes only. Byte identity cannot be checked for such a sink.
type MetadataOnly interface{ MetadataOnly() }

// BrokenClassifier is implemented by a Target whose sink documents the class its broken destination yields
// (for example a destination that answers with a permanent refusal). Without it the suite requires a class
// other than Permanent: an outage must be retried, not dead-lettered.
type BrokenClassifier interface{ BrokenClass() sinks.Class }

// Reconnecting is implemented by a Target whose sink holds a connection to its destination (the broker
// sinks). The suite puts a Proxy between sink and destination, cuts it and refuses it for a while, and
// requires the same sink to deliver again once the path is back (design §6: "connection handling (connect,
// reconnect with back-off) inside the sink").
type Reconnecting interface {
	// Upstream is the destination's host:port, the address the proxy forwards to.
	Upstream() string
	// NewAt returns a sink like New's that connects to addr (the proxy) instead of Upstream. The suite
	// closes it.
	NewAt(t *testing.T, addr string) sinks.Sink
}

// Durability is implemented by a Target that states whether its destination keeps a delivered hook once
// nobody is connected (JetStream, Kafka: true; Redis pub/sub, the log: false). The suite requires the sink's
// Durable to say the same: wal.type none relies on it (inventory D.6).
type Durability interface{ KeepsHooks() bool }

// attemptTimeout bounds every attempt of the suite; a sink that needs longer against a local destination is
// broken.
const attemptTimeout = 30 * time.Second

// ReconnectWithin is how soon a sink must deliver again once its destination is reachable: its back-off
// between reconnects must not exceed this against a loopback broker.
const ReconnectWithin = 10 * time.Second

// unreachableAttempt is the deadline of an attempt made while the destination is unreachable.
const unreachableAttempt = 2 * time.Second

// promptly is how soon Deliver must give up on a cancelled context.
const promptly = 2 * time.Second

// Run runs the conformance suite against tgt.
func Run(t *testing.T, tgt Target) {
	_, metaOnly := tgt.(MetadataOnly)
	c := &suite{tgt: tgt, metaOnly: metaOnly}
	t.Run("DeliveredBodyArrivesByteIdentical", c.byteIdentical)
	t.Run("NilOnlyAfterDestinationHasIt", c.nilMeansDelivered)
	t.Run("BrokenDestinationIsNotPermanent", c.broken)
	t.Run("CancelledContextReturnsPromptly", c.cancelled)
	t.Run("ConcurrentDeliverIsSafe", c.concurrent)
	t.Run("CloseIsIdempotent", c.close)
	t.Run("SafeDeliverRecoversPanic", c.safeDeliver)
	if rc, ok := tgt.(Reconnecting); ok {
		t.Run("ReconnectsAfterConnectionDrop", func(t *testing.T) { c.reconnects(t, rc) })
		t.Run("UnreachableThenBack", func(t *testing.T) { c.unreachable(t, rc) })
	}
	if d, ok := tgt.(Durability); ok {
		t.Run("DurableTellsTheTruth", func(t *testing.T) { c.durable(t, d) })
	}
}

type suite struct {
	tgt      Target
	metaOnly bool
}

func (c *suite) sink(t *testing.T) sinks.Sink {
	t.Helper()
	s := c.tgt.New(t)
	if s == nil {
		t.Fatal("Target.New returned nil")
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Envelope returns an envelope with a fresh UUIDv7 id, every metadata field set, and a copy of body.
func Envelope(body []byte) *sinks.Envelope {
	id := uuid.Must(uuid.NewV7())
	return &sinks.Envelope{
		ID:           id,
		IDText:       id.String(),
		Source:       "sinktest",
		Tenant:       "acme",
		ReceivedAt:   time.Now().UnixMilli(),
		ContentType:  "application/octet-stream",
		Headers:      []sinks.Header{{Name: "x-provider-event", Value: "push"}, {Name: "authorization", Value: "Bearer secret"}},
		Body:         append([]byte{}, body...),
		DedupeKey:    "dk-" + id.String()[:8],
		Verification: "ok",
		Attempt:      1,
	}
}

// Binary returns n random bytes with a NUL and an invalid UTF-8 sequence at the front when n allows.
func Binary(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	copy(b, []byte{0x00, 0xff, 0xfe, '\r', '\n'})
	return b
}

// deliver runs one attempt that must succeed and checks what arrived. The caller's buffer is scribbled over
// once Deliver returns, as the dispatcher reuses it: a sink that retained it shows the damage.
func (c *suite) deliver(t *testing.T, s sinks.Sink, body []byte) {
	t.Helper()
	e := Envelope(body)
	if err := c.deliverOnce(s, e); err != nil {
		cl, _ := sinks.Classify(err)
		t.Fatalf("Deliver(%d bytes) = %v (%s), want nil", len(body), err, cl)
	}
	if !bytes.Equal(e.Body, body) {
		t.Fatalf("Deliver modified the envelope body (%d bytes)", len(body))
	}
	for i := range e.Body {
		e.Body[i] ^= 0x5a
	}
	c.expectReceived(t, e.IDText, body)
}

func (c *suite) deliverOnce(s sinks.Sink, e *sinks.Envelope) error {
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	return s.Deliver(ctx, e)
}

func (c *suite) expectReceived(t *testing.T, id string, body []byte) {
	t.Helper()
	got, ok := c.tgt.Received(t, id)
	if !ok || len(got) == 0 {
		t.Fatalf("Deliver returned nil but the destination has nothing for %s", id)
	}
	for i, g := range got {
		switch {
		case c.metaOnly && len(g) != len(body):
			t.Fatalf("destination recorded size %d for %s (copy %d), want %d", len(g), id, i, len(body))
		case !c.metaOnly && !bytes.Equal(g, body):
			t.Fatalf("destination got %d bytes for %s (copy %d), not byte-identical to the %d sent", len(g), id, i, len(body))
		}
	}
}

// Design §6: "Byte-exact raw body through verify, store, archive and every sink" (inventory K.7).
func (c *suite) byteIdentical(t *testing.T) {
	s := c.sink(t)
	for _, n := range []int{1024, 0, 256 << 10} {
		t.Run(fmt.Sprintf("size=%d", n), func(t *testing.T) { c.deliver(t, s, Binary(n)) })
	}
}

// Design §6: "A sink's nil means the destination confirmed".
func (c *suite) nilMeansDelivered(t *testing.T) {
	s := c.sink(t)
	e := Envelope([]byte(`{"event":"ping"}`))
	if got, ok := c.tgt.Received(t, e.IDText); ok || len(got) > 0 {
		t.Fatalf("destination reports %d bodies for an id never sent", len(got))
	}
	if err := c.deliverOnce(s, e); err != nil {
		t.Fatalf("Deliver = %v, want nil", err)
	}
	c.expectReceived(t, e.IDText, []byte(`{"event":"ping"}`))
}

// Inventory D.1: "{:permanent, term} → dead-letter now"; an outage must not dead-letter hooks.
func (c *suite) broken(t *testing.T) {
	s := c.tgt.Broken(t)
	if s == nil {
		t.Skip("the target's sink cannot fail (Broken returned nil)")
	}
	t.Cleanup(func() { _ = s.Close() })
	want := sinks.Transient
	bc, documented := c.tgt.(BrokenClassifier)
	if documented {
		want = bc.BrokenClass()
	}
	for i := 0; i < 2; i++ { // twice: a failed attempt must not wedge the sink into a different answer
		err := c.deliverOnce(s, Envelope([]byte("refused")))
		if err == nil {
			t.Fatal("Deliver to a broken destination returned nil")
		}
		cl, _ := sinks.Classify(err)
		if documented && cl != want {
			t.Fatalf("broken destination classified %s, the target documents %s (err: %v)", cl, want, err)
		}
		if !documented && cl == sinks.PermanentClass {
			t.Fatalf("broken destination classified permanent: an outage would dead-letter hooks (err: %v)", err)
		}
	}
}

// Sink contract: "a cancelled ctx makes Deliver return promptly with an error".
func (c *suite) cancelled(t *testing.T) {
	s := c.sink(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- s.Deliver(ctx, Envelope(Binary(64))) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Deliver with a cancelled context returned nil")
		}
		if el := time.Since(start); el > promptly {
			t.Fatalf("Deliver with a cancelled context took %s", el)
		}
	case <-time.After(attemptTimeout):
		t.Fatal("Deliver with a cancelled context did not return")
	}
}

// A lane runs several attempts of one sink at once (design §6: "runs attempts up to its concurrency").
func (c *suite) concurrent(t *testing.T) {
	s := c.sink(t)
	const workers, each = 8, 16
	type sent struct {
		id   string
		body []byte
	}
	var (
		mu   sync.Mutex
		all  []sent
		errs []error
		wg   sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				body := Binary(512 + w*each + i)
				e := Envelope(body)
				err := c.deliverOnce(s, e)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					all = append(all, sent{e.IDText, body})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d concurrent deliveries failed, first: %v", len(errs), workers*each, errs[0])
	}
	for _, x := range all {
		c.expectReceived(t, x.id, x.body)
	}
}

// Sink contract: "Close is idempotent; Deliver after Close returns an error".
func (c *suite) close(t *testing.T) {
	s := c.tgt.New(t)
	c.deliver(t, s, []byte("before close"))
	if err := s.Close(); err != nil {
		t.Fatalf("first Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil (idempotent)", err)
	}
	if err := c.deliverOnce(s, Envelope([]byte("after close"))); err == nil {
		t.Fatal("Deliver after Close returned nil: a closed sink claimed a delivery")
	}
}

// Inventory D.1: "Raise/throw/exit/other return ⇒ {:error, _} on every path (Sink.safe_deliver/4)".
func (c *suite) safeDeliver(t *testing.T) {
	s := c.sink(t)
	e := Envelope([]byte("through SafeDeliver"))
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	if err := sinks.SafeDeliver(ctx, s, e); err != nil {
		t.Fatalf("SafeDeliver = %v, want nil", err)
	}
	c.expectReceived(t, e.IDText, []byte("through SafeDeliver"))

	// The panic value is itself a Permanent error: a panic must still be a retry.
	err := sinks.SafeDeliver(ctx, panicking{s}, Envelope([]byte("then panics")))
	if !errors.Is(err, sinks.ErrPanicked) {
		t.Fatalf("SafeDeliver of a panicking sink = %v, want ErrPanicked", err)
	}
	if cl, _ := sinks.Classify(err); cl != sinks.Transient {
		t.Fatalf("a panic classified %s, want transient", cl)
	}
}

func (c *suite) proxied(t *testing.T, rc Reconnecting) (*Proxy, sinks.Sink) {
	t.Helper()
	p := NewProxy(t, rc.Upstream())
	s := rc.NewAt(t, p.Addr())
	if s == nil {
		t.Fatal("Target.NewAt returned nil")
	}
	t.Cleanup(func() { _ = s.Close() })
	return p, s
}

// deliverAgain delivers fresh envelopes until one returns nil within ReconnectWithin, requiring every failure
// on the way to be something other than Permanent, then checks the destination has it.
func (c *suite) deliverAgain(t *testing.T, s sinks.Sink, what string) {
	t.Helper()
	deadline := time.Now().Add(ReconnectWithin)
	for n := 1; ; n++ {
		body := []byte(fmt.Sprintf("%s, attempt %d", what, n))
		e := Envelope(body)
		err := c.deliverOnce(s, e)
		if err == nil {
			c.expectReceived(t, e.IDText, body)
			return
		}
		if cl, _ := sinks.Classify(err); cl == sinks.PermanentClass {
			t.Fatalf("%s: attempt %d classified permanent: an outage would dead-letter hooks (err: %v)", what, n, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the sink did not deliver again within %s (last error: %v)", what, ReconnectWithin, err)
		}
		time.Sleep(50 * time.Millisecond) // pace the attempts as a lane's back-off would; the sink decides when to redial
	}
}

// Design §6: a sink reconnects with back-off on its own; the caller keeps the same sink.
func (c *suite) reconnects(t *testing.T, rc Reconnecting) {
	p, s := c.proxied(t, rc)
	c.deliver(t, s, []byte("before the drop"))
	p.Sever()
	c.deliverAgain(t, s, "after the drop")
	p.Sever()
	p.Sever() // twice in a row: a reconnect that meets a second cut must not wedge the sink
	c.deliverAgain(t, s, "after two drops")
}

// While the destination cannot be reached an attempt fails within its deadline, not as Permanent, and never
// returns nil; once it is back the same sink delivers.
func (c *suite) unreachable(t *testing.T, rc Reconnecting) {
	p, s := c.proxied(t, rc)
	c.deliver(t, s, []byte("before the outage"))
	p.Pause()
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), unreachableAttempt)
		start := time.Now()
		err := s.Deliver(ctx, Envelope([]byte("during the outage")))
		took := time.Since(start)
		cancel()
		if err == nil {
			t.Fatal("Deliver returned nil while the destination was unreachable")
		}
		if cl, _ := sinks.Classify(err); cl == sinks.PermanentClass {
			t.Fatalf("an unreachable destination classified permanent (err: %v)", err)
		}
		if took > unreachableAttempt+promptly {
			t.Fatalf("an attempt with a %s deadline took %s while the destination was unreachable", unreachableAttempt, took)
		}
	}
	p.Resume()
	c.deliverAgain(t, s, "after the outage")
}

// Inventory D.1: durable?/1 — "Sink.Log and Sink.Redis false"; D.6: wal.type none counts on it.
func (c *suite) durable(t *testing.T, d Durability) {
	s := c.sink(t)
	if got, want := s.Durable(), d.KeepsHooks(); got != want {
		t.Fatalf("Durable() = %v, but the destination keeps hooks: %v", got, want)
	}
}

// panicking delivers through the real sink, then panics, as a sink with a bug after its I/O would.
type panicking struct{ sinks.Sink }

func (p panicking) Deliver(ctx context.Context, e *sinks.Envelope) error {
	_ = p.Sink.Deliver(ctx, e)
	panic(sinks.Permanent(errors.New("sinktest: deliberate panic")))
}
