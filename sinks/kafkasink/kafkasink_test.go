package kafkasink

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
	"github.com/ankusa-go/ankusa/test/poll"
)

// target runs the conformance suite against a three-broker kfake cluster, reading the topic back as a consumer.
type target struct {
	brokers []string
	c       *consumer
}

func (tg *target) New(t *testing.T) sinks.Sink {
	// The suite sends bodies up to 256 KiB inline: raise inline_max_bytes past them (no claim check here).
	return newTestSink(t, tg.brokers, map[string]any{"inline_max_bytes": 1 << 20})
}

func (tg *target) Received(t *testing.T, id string) ([][]byte, bool) {
	return sinktest.ReceivedMessages(t, tg.c.payloads(id))
}

// Broken points at a port nothing listens on: the cluster is unreachable.
func (tg *target) Broken(t *testing.T) sinks.Sink {
	return newTestSink(t, []string{deadAddr(t)}, map[string]any{"produce_timeout_ms": 1000})
}

// KeepsHooks: an acknowledged record stays in the topic whoever consumes it.
func (tg *target) KeepsHooks() bool { return true }

func deadAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestConformance(t *testing.T) {
	c := newCluster(t)
	sinktest.Run(t, &target{brokers: c.ListenAddrs(), c: newConsumer(t, c.ListenAddrs(), testTopic)})
}

// Inventory D.4: the record's value is Message v1 with the body byte-exact, its headers the broker header set,
// its key tenant/source.
func TestConsumerReadsMessageV1(t *testing.T) {
	c := newCluster(t)
	s := newTestSink(t, c.ListenAddrs(), nil)
	body := sinktest.Binary(4096)
	e := sinktest.Envelope(body)
	e.ReplayID = "rp1"
	if err := sinktest.Deliver(s, e, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	recs := newConsumer(t, c.ListenAddrs(), testTopic).records(e.IDText)
	if len(recs) != 1 {
		t.Fatalf("%d records for the hook, want 1", len(recs))
	}
	r := recs[0]
	if want := message.Encode(nil, e, message.Meta{Instance: "n1"}); !bytes.Equal(r.Value, want) {
		t.Fatalf("record value is not message.Encode's bytes:\n got %s\nwant %s", r.Value, want)
	}
	m, err := message.Decode(r.Value)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Body(), body) || m.ID != e.IDText || m.Instance != "n1" {
		t.Fatalf("decoded message: id %s instance %q, body equal %v", m.ID, m.Instance, bytes.Equal(m.Body(), body))
	}
	if string(r.Key) != "acme/sinktest" {
		t.Fatalf("key %q, want acme/sinktest", r.Key)
	}
	var got []sinks.Header
	for _, h := range r.Headers {
		got = append(got, sinks.Header{Name: h.Key, Value: string(h.Value)})
	}
	want := message.Attributes(e)
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("header %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// Design §6: "a sink's nil means the destination confirmed: Kafka acks=all". A partition without enough
// in-sync replicas refuses the record: the attempt fails, is not permanent, and the same hook delivered after
// the replicas are back is in the topic — nothing is lost.
func TestNotEnoughReplicasIsRetriedAndNothingLost(t *testing.T) {
	c := newCluster(t)
	s := newTestSink(t, c.ListenAddrs(), map[string]any{"produce_timeout_ms": 1000})
	cons := newConsumer(t, c.ListenAddrs(), testTopic)
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: kerr.NotEnoughReplicas, Count: -1})

	body := []byte(`{"event":"order.paid"}`)
	e := sinktest.Envelope(body)
	start := time.Now()
	err := sinktest.Deliver(s, e, 10*time.Second)
	if err == nil {
		t.Fatal("Deliver returned nil while every produce is refused with NOT_ENOUGH_REPLICAS")
	}
	if cl, _ := sinks.Classify(err); cl == sinks.PermanentClass {
		t.Fatalf("NOT_ENOUGH_REPLICAS classified permanent: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("the refused attempt took %s; produce_timeout_ms is 1000 (err %v)", el, err)
	}
	if h.Hits() == 0 {
		t.Fatal("the fault never saw a produce request")
	}
	if got := cons.records(e.IDText); len(got) != 0 {
		t.Fatalf("%d records of a refused hook in the topic", len(got))
	}

	h.Remove()
	// Dispatch retries the hook until an attempt is acknowledged; the refused attempt's record may land too
	// (at-least-once), but every copy is the hook.
	poll.Eventually(t, 20*time.Second, func() error { return sinktest.Deliver(s, e, 10*time.Second) })
	got, err := cons.bodies(e.IDText)
	if err != nil || len(got) == 0 {
		t.Fatalf("after recovery: %d copies (err %v), want the body", len(got), err)
	}
	for _, g := range got {
		if !bytes.Equal(g, body) {
			t.Fatalf("a copy differs from the body: %q", g)
		}
	}
}

// An attempt that meets a refusing partition keeps trying within produce_timeout_ms: when the replicas come
// back during the attempt, it succeeds.
func TestAttemptOutlastsABriefRefusal(t *testing.T) {
	c := newCluster(t)
	s := newTestSink(t, c.ListenAddrs(), map[string]any{"produce_timeout_ms": 20_000})
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: kerr.NotEnoughReplicas, Count: -1})
	e := sinktest.Envelope([]byte("brief"))
	done := make(chan error, 1)
	go func() { done <- sinktest.Deliver(s, e, 30*time.Second) }()
	poll.True(t, 10*time.Second, "two refused produce requests", func() bool { return h.Hits() >= 2 })
	h.Remove()
	if err := <-done; err != nil {
		t.Fatalf("Deliver = %v, want nil once the refusal ended", err)
	}
	if got := newConsumer(t, c.ListenAddrs(), testTopic).records(e.IDText); len(got) != 1 {
		t.Fatalf("%d records, want 1", len(got))
	}
}

// Inventory D.2: "Permanent failures: oversize, message_too_large, invalid_message, invalid_record".
func TestOversizeIsPermanent(t *testing.T) {
	c := newCluster(t)
	cons := newConsumer(t, c.ListenAddrs(), testTopic)

	s := newTestSink(t, c.ListenAddrs(), map[string]any{"max_record_bytes": 2048})
	e := sinktest.Envelope(sinktest.Binary(4096))
	err := sinktest.Deliver(s, e, 10*time.Second)
	if cl, _ := sinks.Classify(err); cl != sinks.PermanentClass || !errors.Is(err, ErrOversize) {
		t.Fatalf("a record over max_record_bytes: %v (%s), want a permanent ErrOversize", err, cl)
	}

	inline := newTestSink(t, c.ListenAddrs(), map[string]any{"inline_max_bytes": 1024})
	e2 := sinktest.Envelope(sinktest.Binary(1025))
	err = sinktest.Deliver(inline, e2, 10*time.Second)
	if cl, _ := sinks.Classify(err); cl != sinks.PermanentClass || !errors.Is(err, ErrOversize) {
		t.Fatalf("a body over inline_max_bytes without a claim: %v (%s), want a permanent ErrOversize", err, cl)
	}

	for _, code := range []*kerr.Error{kerr.MessageTooLarge, kerr.InvalidRecord, kerr.CorruptMessage} {
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: code, Count: -1})
		plain := newTestSink(t, c.ListenAddrs(), nil)
		err := sinktest.Deliver(plain, sinktest.Envelope([]byte("x")), 10*time.Second)
		h.Remove()
		if cl, _ := sinks.Classify(err); cl != sinks.PermanentClass || !errors.Is(err, code) {
			t.Fatalf("broker answered %s: %v (%s), want permanent", code.Message, err, cl)
		}
	}
	if got := cons.records(e.IDText); len(got) != 0 {
		t.Fatalf("an oversize record reached the topic")
	}
}

// Inventory D.2: "never creates topics"; "All brokers: the destination must already exist; missing → retried".
// The cluster here would create a topic on request, so only the sink's restraint keeps it from existing.
func TestMissingTopicIsRetriedAndNeverCreated(t *testing.T) {
	c := newCluster(t, kfake.AllowAutoTopicCreation())
	s := newTestSink(t, c.ListenAddrs(), map[string]any{"topic": "absent", "produce_timeout_ms": 1000})
	start := time.Now()
	err := sinktest.Deliver(s, sinktest.Envelope([]byte("x")), 10*time.Second)
	if err == nil {
		t.Fatal("Deliver to a missing topic returned nil")
	}
	if cl, _ := sinks.Classify(err); cl == sinks.PermanentClass {
		t.Fatalf("a missing topic classified permanent: %v", err)
	}
	if el := time.Since(start); el > 9*time.Second {
		t.Fatalf("the attempt took %s", el)
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("absent")
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	req.AllowAutoTopicCreation = false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("topic \"absent\" exists after the attempts: %+v", resp.Topics)
	}
}

// The cluster goes away and comes back on the same ports: while it is gone an attempt fails within its
// deadline (franz-go's produce would wait for the cluster), after it is back the sink reconnects on its own
// and delivers, and the record acknowledged before the outage is still there.
func TestClusterRestartReconnects(t *testing.T) {
	ports := make([]int, 3)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	dir := t.TempDir()
	start := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.Ports(ports...), kfake.SeedTopics(testPartitions, testTopic),
			kfake.DataDir(dir), kfake.SyncWrites())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := start()
	addrs := c.ListenAddrs()
	s := newTestSink(t, addrs, map[string]any{"produce_timeout_ms": 1000})
	before := sinktest.Envelope([]byte("before"))
	if err := sinktest.Deliver(s, before, 10*time.Second); err != nil {
		c.Close()
		t.Fatal(err)
	}
	c.Close()

	t0 := time.Now()
	err := sinktest.Deliver(s, sinktest.Envelope([]byte("during")), 1500*time.Millisecond)
	if err == nil {
		t.Fatal("Deliver with the cluster down returned nil")
	}
	if el := time.Since(t0); el > 3*time.Second {
		t.Fatalf("Deliver with the cluster down took %s, past its 1.5 s deadline", el)
	}

	c = start()
	defer c.Close()
	after := sinktest.Envelope([]byte("after"))
	poll.Eventually(t, 20*time.Second, func() error { return sinktest.Deliver(s, after, 2*time.Second) })
	cons := newConsumer(t, addrs, testTopic)
	for _, e := range []*sinks.Envelope{before, after} {
		if got, err := cons.bodies(e.IDText); err != nil || len(got) == 0 || !bytes.Equal(got[0], e.Body) {
			t.Fatalf("%s after the restart: %d copies, err %v", e.Body, len(got), err)
		}
	}
}

// SASL PLAIN and SCRAM are wired to the client: a cluster that requires them accepts the sink with the right
// credentials and refuses it (an error, not permanent) with the wrong ones.
func TestSASL(t *testing.T) {
	for _, mech := range []struct{ opt, kafka string }{
		{"plain", "PLAIN"}, {"scram_sha_256", "SCRAM-SHA-256"}, {"scram_sha_512", "SCRAM-SHA-512"},
	} {
		t.Run(mech.opt, func(t *testing.T) {
			c := newCluster(t, kfake.EnableSASL(), kfake.Superuser(mech.kafka, "ankusa", "s3cret"))
			s := newTestSink(t, c.ListenAddrs(), map[string]any{"sasl": map[string]any{
				"mechanism": mech.opt, "username": "ankusa", "password": "s3cret"}})
			if err := sinktest.Deliver(s, sinktest.Envelope([]byte("authed")), 10*time.Second); err != nil {
				t.Fatalf("with the right credentials: %v", err)
			}
			bad := newTestSink(t, c.ListenAddrs(), map[string]any{"produce_timeout_ms": 1000, "sasl": map[string]any{
				"mechanism": mech.opt, "username": "ankusa", "password": "wrong"}})
			err := sinktest.Deliver(bad, sinktest.Envelope([]byte("refused")), 5*time.Second)
			if cl, _ := sinks.Classify(err); err == nil || cl == sinks.PermanentClass {
				t.Fatalf("with a wrong password: %v (%s), want a non-permanent error", err, cl)
			}
		})
	}
}

// Option problems are reported by name, all at once, never echoing a value (options carry passwords).
func TestOptionsAreValidated(t *testing.T) {
	f := func(opts map[string]any, wants ...string) {
		t.Helper()
		sinktest.RefusesOptions(t, New, Type, opts, wants...)
	}
	f(map[string]any{}, "kafka sink: brokers: is required", "kafka sink: topic: is required")
	f(map[string]any{"brokers": []any{"nohost"}, "topic": "a b"}, "brokers[0]: must be host:port", "topic: must be")
	f(map[string]any{"brokers": "k:9092", "topic": "t", "key": "{tenant}/{nope}"}, "key: placeholders are")
	f(map[string]any{"brokers": "k:9092", "topic": "t", "sasl": map[string]any{"mechanism": "gssapi", "username": "u", "password": sinktest.Secret}},
		"sasl.mechanism: must be one of plain|scram_sha_256|scram_sha_512")
	f(map[string]any{"brokers": "k:9092", "topic": "t", "sasl": map[string]any{"mechanism": "plain", "username": "u"}}, "sasl.password: is required")
	f(map[string]any{"brokers": "k:9092", "topic": "t", "tls": map[string]any{"ca_file": "/nonexistent"}}, "tls.ca_file: cannot be read")
	f(map[string]any{"brokers": "k:9092", "topic": "t", "max_record_bytes": 10, "acks": 1}, "max_record_bytes: must be in", "acks: unknown option")

	st, err := parse(config.SinkSpec{Type: Type, Options: map[string]any{"brokers": []any{"a:1", "b:2"}, "topic": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if st.idempotent || st.inlineMax != 65536 || st.maxRecord != 1_000_000 || st.produceTimeout != 5*time.Second || st.sasl != nil || st.tls != nil {
		t.Fatalf("defaults: %+v", st)
	}
	if got := string(st.key.Append(nil, &sinks.Envelope{Source: "gh"})); got != "default/gh" {
		t.Fatalf("default key without a tenant = %q, want default/gh", got)
	}
}

// Deliver after Close never produces, and Close fails a record still waiting for the cluster instead of
// leaving its attempt hanging.
func TestCloseFailsWaitingAttempts(t *testing.T) {
	c := newCluster(t)
	s := newTestSink(t, c.ListenAddrs(), map[string]any{"produce_timeout_ms": 60_000})
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: kerr.NotEnoughReplicas, Count: -1})
	defer h.Remove()
	done := make(chan error, 1)
	go func() { done <- sinktest.Deliver(s, sinktest.Envelope([]byte("w")), 60*time.Second) }()
	poll.True(t, 10*time.Second, "a refused produce request", func() bool { return h.Hits() >= 1 })
	_ = s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an attempt waiting at Close returned nil")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close left an attempt waiting")
	}
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("late")), time.Second); !errors.Is(err, sinks.ErrClosed) {
		t.Fatalf("Deliver after Close = %v, want ErrClosed", err)
	}
}

// idempotent: true turns franz-go's idempotent producer on (off by default): the sink still delivers, and an
// attempt during a refusal still ends within produce_timeout_ms (the guard does not rely on the client
// dropping the record, which an idempotent producer may not do once a request was sent).
func TestIdempotentProducer(t *testing.T) {
	c := newCluster(t)
	s := newTestSink(t, c.ListenAddrs(), map[string]any{"idempotent": true, "produce_timeout_ms": 1000})
	e := sinktest.Envelope([]byte("once"))
	if err := sinktest.Deliver(s, e, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := newConsumer(t, c.ListenAddrs(), testTopic).records(e.IDText); len(got) != 1 {
		t.Fatalf("%d records, want 1", len(got))
	}
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: testTopic, Err: kerr.NotEnoughReplicas, Count: -1})
	defer h.Remove()
	start := time.Now()
	if err := sinktest.Deliver(s, sinktest.Envelope([]byte("refused")), 10*time.Second); err == nil {
		t.Fatal("Deliver returned nil while every produce is refused")
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("the refused attempt took %s; produce_timeout_ms is 1000", el)
	}
}
