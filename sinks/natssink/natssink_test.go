package natssink

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/capture"
	"github.com/ankusa-go/ankusa/test/leak"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/test/services"
)

func TestMain(m *testing.M) { leak.VerifyTestMain(m) }

// stream is a uniquely named JetStream stream on the machine's NATS, bound to its own subject, that a test
// reads back. The test creates it: the sink never creates streams.
type stream struct {
	name, subject string
	nc            *nats.Conn
	js            jetstream.JetStream

	mu   sync.Mutex
	next uint64                 // next sequence to read
	got  map[string][]*nats.Msg // by ankusa_id header
}

func newStream(t testing.TB) *stream {
	t.Helper()
	services.Require(t, "NATS", services.NATSAddr)
	nc, err := nats.Connect("nats://" + services.NATSAddr)
	if err != nil {
		t.Fatalf("cannot connect to NATS: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.ReplaceAll(uuid.NewString(), "-", "")
	st := &stream{name: "ANKUSA_TEST_" + id, subject: "ankusa.test." + id, nc: nc, js: js, next: 1,
		got: make(map[string][]*nats.Msg)}
	st.create(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, st.name)
		nc.Close()
	})
	return st
}

func (st *stream) create(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := st.js.CreateStream(ctx, jetstream.StreamConfig{Name: st.name, Subjects: []string{st.subject},
		Storage: jetstream.MemoryStorage, MaxBytes: 256 << 20, Duplicates: time.Minute})
	if err != nil {
		t.Fatalf("cannot create stream: %v", err)
	}
	st.mu.Lock()
	st.next = 1
	st.mu.Unlock()
}

func (st *stream) delete(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.js.DeleteStream(ctx, st.name); err != nil {
		t.Fatalf("cannot delete stream: %v", err)
	}
}

// messages reads the stream from where it last stopped and returns what it holds for hook id.
func (st *stream) messages(t testing.TB, id string) []*nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := st.js.Stream(ctx, st.name)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for ; st.next <= info.State.LastSeq; st.next++ {
		raw, err := s.GetMsg(ctx, st.next)
		if err != nil {
			t.Fatalf("get seq %d: %v", st.next, err)
		}
		m := &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
		k := m.Header.Get(message.AttrID)
		st.got[k] = append(st.got[k], m)
	}
	return st.got[id]
}

// target runs the conformance suite against the machine's JetStream.
type target struct{ st *stream }

func newSink(t testing.TB, opts map[string]any) sinks.Sink {
	return sinktest.NewSink(t, New, Type, opts)
}

func (tg *target) New(t *testing.T) sinks.Sink { return tg.NewAt(t, services.NATSAddr) }
func (tg *target) NewAt(t *testing.T, addr string) sinks.Sink {
	// The suite sends 256 KiB bodies inline; the default threshold is the claim check's business.
	return newSink(t, map[string]any{"servers": []any{"nats://" + addr}, "subject": tg.st.subject, "inline_max_bytes": 1 << 20})
}
func (tg *target) Upstream() string { return services.NATSAddr }
func (tg *target) KeepsHooks() bool { return true }

// Broken publishes on a subject no stream is bound to: no_stream must be retried, not dead-lettered.
func (tg *target) Broken(t *testing.T) sinks.Sink {
	return newSink(t, map[string]any{"servers": "nats://" + services.NATSAddr, "subject": "ankusa.nostream." + uuid.NewString()})
}

func (tg *target) Received(t *testing.T, id string) ([][]byte, bool) {
	var payloads [][]byte
	for _, m := range tg.st.messages(t, id) {
		payloads = append(payloads, m.Data)
	}
	return sinktest.ReceivedMessages(t, payloads)
}

func TestConformance(t *testing.T) {
	sinktest.Run(t, &target{st: newStream(t)})
}

// Inventory D.2 "JetStream pub ack" and D.4: nil means the stream holds the Message v1, with the broker
// header set and Nats-Msg-Id; a retry of the same hook is a duplicate the stream drops, a replay is stored
// again under "<id>:replay:<replay_id>".
func TestNilMeansTheStreamHoldsIt(t *testing.T) {
	st := newStream(t)
	s := newSink(t, map[string]any{"servers": "nats://" + services.NATSAddr, "subject": st.subject})
	defer s.Close()
	e := sinktest.Envelope([]byte(`{"event":"push"}`))
	if err := sinktest.Deliver(s, e, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	msgs := st.messages(t, e.IDText)
	if len(msgs) != 1 {
		t.Fatalf("stream holds %d messages for the hook, want 1", len(msgs))
	}
	m := msgs[0]
	if want := message.Encode(nil, e, message.Meta{Instance: "n1"}); string(m.Data) != string(want) {
		t.Fatalf("stored %s\nwant %s", m.Data, want)
	}
	for _, a := range message.Attributes(e) {
		if got := m.Header.Get(a.Name); got != a.Value {
			t.Errorf("header %s = %q, want %q", a.Name, got, a.Value)
		}
	}
	if got := m.Header.Get(jetstream.MsgIDHeader); got != e.IDText {
		t.Fatalf("Nats-Msg-Id = %q, want the hook id", got)
	}

	if err := sinktest.Deliver(s, e, 10*time.Second); err != nil { // a retry after a lost ack
		t.Fatalf("retry: %v", err)
	}
	if n := len(st.messages(t, e.IDText)); n != 1 {
		t.Fatalf("a retry of the same hook was stored again (%d messages)", n)
	}
	e.ReplayID = "rp1"
	if err := sinktest.Deliver(s, e, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	msgs = st.messages(t, e.IDText)
	if len(msgs) != 2 || msgs[1].Header.Get(jetstream.MsgIDHeader) != e.IDText+":replay:rp1" ||
		msgs[1].Header.Get(message.AttrReplayID) != "rp1" {
		t.Fatalf("replay: %d messages, last %v", len(msgs), msgs[len(msgs)-1].Header)
	}
}

// Inventory D.2: "no_stream (retried); never creates streams". The stream deleted mid-run makes attempts
// fail as Transient no_stream; recreated, the same sink delivers again.
func TestNoStreamIsRetriedUntilTheStreamIsBack(t *testing.T) {
	st := newStream(t)
	s := newSink(t, map[string]any{"servers": "nats://" + services.NATSAddr, "subject": st.subject})
	defer s.Close()
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("first")), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	st.delete(t)
	err := sinktest.Deliver(s, sinktest.Envelope([]byte("while gone")), 10*time.Second)
	if cl, _ := sinks.Classify(err); !errors.Is(err, ErrNoStream) || cl != sinks.Transient {
		t.Fatalf("Deliver without a stream = %v (%s), want transient ErrNoStream", err, cl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := st.js.Stream(ctx, st.name); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the sink created a stream: %v", err)
	}
	st.create(t)
	e := sinktest.Envelope([]byte("after"))
	if err := sinktest.Deliver(s, e, 10*time.Second); err != nil {
		t.Fatalf("after the stream is back: %v", err)
	}
	if len(st.messages(t, e.IDText)) != 1 {
		t.Fatal("the recreated stream does not hold the hook")
	}
}

// Inventory D.5: a body over inline_max_bytes without a claim is refused as Permanent; with a claim it
// travels as the ref.
func TestInlineMaxBytes(t *testing.T) {
	st := newStream(t)
	s := newSink(t, map[string]any{"servers": "nats://" + services.NATSAddr, "subject": st.subject, "inline_max_bytes": 16})
	sinktest.InlineLimit(t, s, ErrInlineTooLarge, func(id string) [][]byte {
		var out [][]byte
		for _, m := range st.messages(t, id) {
			out = append(out, m.Data)
		}
		return out
	})
}

// A message over the server's max_payload can never be published: Permanent.
func TestOverMaxPayloadIsPermanent(t *testing.T) {
	st := newStream(t)
	s := newSink(t, map[string]any{"servers": "nats://" + services.NATSAddr, "subject": st.subject, "inline_max_bytes": 64 << 20})
	defer s.Close()
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("connect")), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	err := sinktest.Deliver(s, sinktest.Envelope(make([]byte, int(st.nc.MaxPayload())+1)), 10*time.Second)
	if cl, _ := sinks.Classify(err); cl != sinks.PermanentClass || !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("over max_payload: %v (%s)", err, cl)
	}
}

// Option problems name the option, never its value.
func TestOptions(t *testing.T) {
	for name, c := range map[string]struct {
		opts map[string]any
		want string
	}{
		"no servers":     {map[string]any{"subject": "a"}, "nats sink: servers: is required"},
		"http server":    {map[string]any{"servers": "http://u:hunter2@x:4222", "subject": "a"}, "nats sink: servers: each server"},
		"no subject":     {map[string]any{"servers": "x:4222"}, "nats sink: subject: is required"},
		"wildcard":       {map[string]any{"servers": "x:4222", "subject": "a.*"}, "nats sink: subject: must be"},
		"empty token":    {map[string]any{"servers": "x:4222", "subject": "a", "auth": map[string]any{"token": ""}}, "nats sink: auth.token: must not be empty"},
		"mixed auth":     {map[string]any{"servers": "x:4222", "subject": "a", "auth": map[string]any{"token": "hunter2", "user": "u"}}, "nats sink: auth: must be exactly one of"},
		"user no pass":   {map[string]any{"servers": "x:4222", "subject": "a", "auth": map[string]any{"user": "u"}}, "nats sink: auth: must be exactly one of"},
		"bad seed":       {map[string]any{"servers": "x:4222", "subject": "a", "auth": map[string]any{"nkey_seed": "hunter2", "jwt": "j"}}, "nats sink: auth.nkey_seed: is not an NKey seed"},
		"auth key":       {map[string]any{"servers": "x:4222", "subject": "a", "auth": map[string]any{"pass": "hunter2"}}, "nats sink: auth.pass: unknown option"},
		"tls half":       {map[string]any{"servers": "x:4222", "subject": "a", "tls": map[string]any{"cert_file": "c"}}, "nats sink: tls: cert_file and key_file go together"},
		"tls key":        {map[string]any{"servers": "x:4222", "subject": "a", "tls": map[string]any{"verify": "no"}}, "nats sink: tls.verify: unknown option"},
		"timeout":        {map[string]any{"servers": "x:4222", "subject": "a", "publish_timeout_ms": 0}, "nats sink: publish_timeout_ms: must be in"},
		"unknown option": {map[string]any{"servers": "x:4222", "subject": "a", "stream": "S"}, "nats sink: stream: unknown option"},
	} {
		t.Run(name, func(t *testing.T) { sinktest.RefusesOptions(t, New, Type, c.opts, c.want) })
	}
	for name, opts := range map[string]map[string]any{
		"user":  {"servers": []any{"a:4222", "nats://b:4222"}, "subject": "a.b", "auth": map[string]any{"user": "u", "password": "p"}},
		"token": {"servers": "tls://a:4222", "subject": "a", "auth": map[string]any{"token": "t"}, "tls": true},
		"files": {"servers": "a", "subject": "a", "tls": map[string]any{"ca_file": "ca.pem", "cert_file": "c.pem", "key_file": "k.pem"}},
	} {
		s, err := New(config.SinkSpec{Type: Type, Options: opts}, sinks.Deps{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		st := s.(*sink).settings
		if st.inlineMax != DefaultInlineMaxBytes || st.timeout != DefaultPublishTimeout || !s.Durable() {
			t.Fatalf("%s: defaults %+v", name, st)
		}
		_ = s.Close()
	}
}

// The servers accept a user and password, or a token, when they require one. The machine's NATS has no
// accounts configured, so this checks that the options reach the connection and the sink still delivers.
func TestAuthOptionsConnect(t *testing.T) {
	st := newStream(t)
	for _, auth := range []map[string]any{{"user": "u", "password": "p"}, {"token": "t"}} {
		s := newSink(t, map[string]any{"servers": "nats://" + services.NATSAddr, "subject": st.subject, "auth": auth})
		if err := sinktest.Deliver(s, sinktest.Envelope([]byte("authed")), 10*time.Second); err != nil {
			t.Fatalf("auth %v: %v", auth, err)
		}
		_ = s.Close()
	}
}

// A cut connection is logged once as a warning (an outage an operator may need to see); a Close is not.
func TestLogsOutagesNotStops(t *testing.T) {
	st := newStream(t)
	var buf capture.Buffer
	p := sinktest.NewProxy(t, services.NATSAddr)
	s, err := New(config.SinkSpec{Type: Type, Options: map[string]any{"servers": "nats://" + p.Addr(), "subject": st.subject}},
		sinks.Deps{Instance: "n1", Log: zerolog.New(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("x")), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	lost := func() int { return strings.Count(buf.String(), "nats connection lost") }
	p.Sever()
	poll.True(t, 5*time.Second, "the cut is logged", func() bool { return lost() == 1 })
	poll.True(t, 5*time.Second, "the restored connection is logged", func() bool { return strings.Contains(buf.String(), "nats connection restored") })
	_ = s.Close()
	time.Sleep(100 * time.Millisecond) // nats.go runs the handler asynchronously; give a wrong warning time to land
	if n := lost(); n != 1 {
		t.Fatalf("%d outage warnings after Close, want the one cut: %s", n, buf.String())
	}
}

// Sink contract: "a cancelled ctx makes Deliver return promptly". A server that accepts and never answers
// holds the first connect for its whole dial timeout; an attempt still gives up at its own deadline, and
// Close waits for the connect to end.
func TestFirstConnectDoesNotOutwaitTheAttempt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 64) // the first connect dials once; room to spare
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // never answered: no INFO
		}
	}()
	s := newSink(t, map[string]any{"servers": "nats://" + ln.Addr().String(), "subject": "a", "publish_timeout_ms": 5000})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Deliver(ctx, sinktest.Envelope([]byte("x")))
	if took := time.Since(start); err == nil || took > 2*time.Second {
		t.Fatalf("Deliver = %v after %s, want an error at the attempt's 300 ms deadline", err, took)
	}
	if cl, _ := sinks.Classify(err); !errors.Is(err, ErrNotConnected) || cl != sinks.Transient {
		t.Fatalf("Deliver while connecting = %v (%s), want transient ErrNotConnected", err, cl)
	}
	_ = ln.Close()
	<-done
	close(held)
	for c := range held {
		_ = c.Close() // the server goes away: the connect ends at once
	}
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the connect ended")
	}
}
