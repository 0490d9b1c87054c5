package claimcheck_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/fixture/s3fake"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/test/services"
)

// brokers is one test's own JetStream stream and Redis channel on the machine's servers.
type brokers struct {
	js      jetstream.JetStream
	stream  string
	subject string
	cons    jetstream.Consumer
	rc      *redis.Client
	channel string
}

func newBrokers(t *testing.T, ctx context.Context) *brokers {
	t.Helper()
	services.Require(t, "NATS", services.NATSAddr)
	services.Require(t, "Redis", services.RedisAddr)
	nc, err := nats.Connect("nats://" + services.NATSAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	u := strings.ReplaceAll(uuid.NewString(), "-", "")
	b := &brokers{js: js, stream: "ANKUSA_CLAIMS_" + u, subject: "ankusa.claims." + u, channel: "ankusa-claims-" + u}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: b.stream, Subjects: []string{b.subject}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), b.stream) })
	if b.cons, err = st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{}); err != nil {
		t.Fatal(err)
	}
	b.rc = redis.NewClient(&redis.Options{Addr: services.RedisAddr, DisableIdentity: true})
	t.Cleanup(func() { _ = b.rc.Close() })
	return b
}

// sinks is a source of tenant acme with a JetStream sink and a Redis sink, both at the default
// inline_max_bytes (64 KiB).
func (b *brokers) source() config.Source {
	return config.Source{Tenant: "acme", Sinks: []config.SinkSpec{
		{Type: "nats", Options: map[string]any{"servers": []any{"nats://" + services.NATSAddr}, "subject": b.subject}},
		{Type: "redis", Options: map[string]any{"url": "redis://" + services.RedisAddr, "channel": b.channel}},
	}}
}

func (b *brokers) subscribe(t *testing.T, ctx context.Context) *redis.PubSub {
	t.Helper()
	sub := b.rc.Subscribe(ctx, b.channel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	return sub
}

func (b *brokers) natsMessage(t *testing.T) *message.Message {
	t.Helper()
	msg, err := b.cons.Next(jetstream.FetchMaxWait(20 * time.Second))
	if err != nil {
		t.Fatalf("nothing reached the JetStream consumer: %v", err)
	}
	return decodeClaimed(t, "nats", msg.Data())
}

func redisMessage(t *testing.T, ctx context.Context, sub *redis.PubSub) *message.Message {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	raw, err := sub.ReceiveMessage(rctx)
	if err != nil {
		t.Fatalf("nothing reached the Redis subscriber: %v", err)
	}
	return decodeClaimed(t, "redis", []byte(raw.Payload))
}

func decodeClaimed(t *testing.T, via string, data []byte) *message.Message {
	t.Helper()
	if len(data) > 4096 {
		t.Fatalf("%s: a %d-byte message: the body travelled inline", via, len(data))
	}
	m, err := message.Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", via, err)
	}
	if m.Inline() || !strings.HasPrefix(m.Claim, "urn:ankusa:claim:v1:acme:") {
		t.Fatalf("%s: message without a claim (claim %q)", via, m.Claim)
	}
	return m
}

// redeem checks the message against the posted body: the right sha256 in the message, and the gateway's bytes
// byte-exact (message.Redeem verifies size and digest too).
func redeem(t *testing.T, ctx context.Context, inst *instance.Instance, m *message.Message, body []byte) {
	t.Helper()
	sum := sha256.Sum256(body)
	if m.SHA256 != hex.EncodeToString(sum[:]) || m.Size != int64(len(body)) {
		t.Fatalf("message states %d bytes, sha256 %s; posted %d bytes, %x", m.Size, m.SHA256, len(body), sum)
	}
	got, err := message.Redeem(ctx, nil, "http://"+inst.ClaimCheckAddr(), e2eToken, m)
	if err != nil {
		t.Fatalf("Redeem %s: %v", m.Claim, err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("redeemed %d bytes differ from the %d posted", len(got), len(body))
	}
}

// claimStore is the claim store of a test: an in-process S3 service behind a proxy that refuses every request
// (403, a store error no retry inside the S3 client hides) while failing is set.
type claimStore struct {
	s3      *s3fake.Server
	failing atomic.Bool
	proxy   *httptest.Server
}

func newClaimStore(t *testing.T) *claimStore {
	t.Helper()
	cs := &claimStore{s3: s3fake.Start(t)}
	target, err := url.Parse(cs.s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	cs.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cs.failing.Load() {
			http.Error(w, "<Error><Code>AccessDenied</Code></Error>", http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(cs.proxy.Close)
	return cs
}

func (cs *claimStore) config() *config.BlobStore {
	b := cs.s3.BlobStore("")
	b.S3.Endpoint = cs.proxy.URL
	return &b
}

func claimRoles(cfg *config.Config, cs *claimStore, roles ...string) {
	cfg.Node.Roles = append(roles, config.RoleClaimCheck)
	cfg.ClaimCheck.Store = cs.config()
	cfg.Admin.Enabled = false
	cfg.ClaimCheck.Auth.Tokens = []config.ClaimToken{{Token: e2eToken, Scopes: []string{config.ScopeClaimsRead}, Tenants: []string{"acme"}}}
}

func bigBody(t *testing.T) []byte {
	t.Helper()
	body := make([]byte, 200<<10)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	return body
}

// Inventory D.5: a body over the smallest inline_max_bytes of its source's sinks "is checked in once per
// delivery row before any sink runs …, ref handed to every sink and every retry". A 200 KiB hook to a source with
// a JetStream sink and a Redis sink: its first attempts find the claim store failing, which fails them as
// transient (retried, never dead-lettered); once the store is back one check-in serves both sinks; the Redis
// sink's further retries (nobody subscribed yet), before and after a restart of the node, reuse the recorded
// ref; both consumers redeem the same claim to the posted bytes. The store holds one pack, written once.
func TestDispatchChecksAHookInOnceForEverySinkAndRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := newBrokers(t, ctx)
	cs := newClaimStore(t)
	dir := t.TempDir()
	boot := func() *instance.Instance {
		return fixture.InstanceWith(t, "claims-once", func(cfg *config.Config) {
			claimRoles(cfg, cs, config.RoleEdge, config.RoleDispatch)
			cfg.Node.DataDir = dir
			cfg.Dispatch.Retry = config.Retry{BaseMS: 50, MaxMS: 200, MaxAttempts: 1000}
			cfg.Dispatch.BreakerFailures = 0
			cfg.Sources = map[string]config.Source{"gh": b.source()}
		}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})
	}
	metrics := func(inst *instance.Instance) (checkIns, failures, redisRetries prometheus.Counter) {
		cm := inst.Telemetry().Metrics.ClaimCheck
		return cm.Operations.WithLabelValues("ok"), cm.Failures.WithLabelValues("check_in"),
			inst.Telemetry().Metrics.Dispatch.Deliveries.WithLabelValues(telemetry.ResultRetry, "redis")
	}
	inst := boot()
	checkIns, checkInFailures, redisRetries := metrics(inst)

	cs.failing.Store(true)
	body := bigBody(t)
	post(t, inst.IngestAddr(), body)
	poll.True(t, 20*time.Second, "check-ins failing while the claim store refuses writes", func() bool {
		return testutil.ToFloat64(checkInFailures) >= 3
	})
	if n := inst.Store().Counts().Dead; n != 0 {
		t.Fatalf("%d rows dead-lettered by a failed check-in, want them retried", n)
	}
	cs.failing.Store(false)

	fromNATS := b.natsMessage(t)
	// Nobody listens on the channel yet: the Redis sink's attempts fail (no_subscribers) and are retried.
	after := testutil.ToFloat64(redisRetries)
	poll.True(t, 20*time.Second, "the Redis sink retried after the check-in", func() bool {
		return testutil.ToFloat64(redisRetries) >= after+2
	})
	if n := testutil.ToFloat64(checkIns); n != 1 {
		t.Fatalf("%v successful check-ins for one hook with two sinks and retries, want 1", n)
	}
	failed, retried := testutil.ToFloat64(checkInFailures), testutil.ToFloat64(redisRetries)

	// A restart: the Redis row is due again and its attempts read the ref from the store.
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	inst = boot()
	checkIns, checkInFailures, redisRetries = metrics(inst)
	poll.True(t, 20*time.Second, "the Redis sink retried after the restart", func() bool {
		return testutil.ToFloat64(redisRetries) >= 1
	})
	fromRedis := redisMessage(t, ctx, b.subscribe(t, ctx))

	if fromNATS.Claim != fromRedis.Claim {
		t.Fatalf("sinks carry different claims: nats %s, redis %s", fromNATS.Claim, fromRedis.Claim)
	}
	redeem(t, ctx, inst, fromNATS, body)
	redeem(t, ctx, inst, fromRedis, body)
	if n, f := testutil.ToFloat64(checkIns), testutil.ToFloat64(checkInFailures); n != 0 || f != 0 {
		t.Fatalf("the restarted node checked the hook in again (%v ok, %v failed), want it to reuse the recorded ref", n, f)
	}
	if n := cs.s3.Objects(t, "claims/"); n != 1 {
		t.Fatalf("claim store holds %d packs, want one", n)
	}
	t.Logf("one check-in and one pack for 2 sinks, %v failed check-ins, %v Redis retries before the restart and %v after",
		failed, retried, testutil.ToFloat64(redisRetries))
}

// Inventory D.5: "outside dispatch a one-claim pack is checked in with a pack id derived from received_at +
// hash(id)". Under wal.type none the request checks a 200 KiB body in before it publishes, both sinks carry the
// claim, and the consumers redeem it; a check-in that fails answers 503 and reaches no sink.
func TestDirectModeChecksTheBodyInBeforePublishing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := newBrokers(t, ctx)
	sub := b.subscribe(t, ctx)
	cs := newClaimStore(t)
	inst := fixture.InstanceWith(t, "claims-direct", func(cfg *config.Config) {
		claimRoles(cfg, cs, config.RoleEdge)
		cfg.WAL.Type = config.WALNone
		cfg.Sources = map[string]config.Source{"gh": b.source()}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})

	cs.failing.Store(true)
	status, reason := postStatus(t, inst.IngestAddr(), bigBody(t))
	if status != http.StatusServiceUnavailable || !strings.Contains(reason, "claim_check_failed") {
		t.Fatalf("POST with the claim store failing answered %d %s, want 503 claim_check_failed", status, reason)
	}
	cs.failing.Store(false)

	body := bigBody(t)
	post(t, inst.IngestAddr(), body)
	fromNATS, fromRedis := b.natsMessage(t), redisMessage(t, ctx, sub)
	if fromNATS.Claim != fromRedis.Claim || fromNATS.ID != fromRedis.ID {
		t.Fatalf("sinks carry different hooks or claims: nats %s %s, redis %s %s", fromNATS.ID, fromNATS.Claim, fromRedis.ID, fromRedis.Claim)
	}
	redeem(t, ctx, inst, fromNATS, body)
	redeem(t, ctx, inst, fromRedis, body)
	if n := cs.s3.Objects(t, "claims/"); n != 1 {
		t.Fatalf("claim store holds %d packs, want one", n)
	}
	// The refused request reached no sink: the stream holds only the accepted hook.
	info, err := b.js.Stream(ctx, b.stream)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := info.Info(ctx); err != nil || st.State.Msgs != 1 {
		t.Fatalf("stream state %+v, %v; want 1 message", st, err)
	}
}

// postStatus sends body to source gh and returns the status and the answer's body.
func postStatus(t *testing.T, addr string, body []byte) (int, string) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Post("http://"+addr+"/webhooks/gh", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(text)
}

// Inventory D.5: the threshold is the "smallest threshold among the source's sinks", and HTTP sinks never claim.
// A 4 KiB body to a source with a JetStream sink (64 KiB limit), a Redis sink (1 KiB limit) and an HTTP sink:
// both queue sinks carry the claim, the JetStream one although the body fits its own limit, so the message is
// the same on both transports; the HTTP destination gets the body itself.
func TestSmallestInlineLimitOfTheSourceDecidesAndHTTPNeverClaims(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := newBrokers(t, ctx)
	sub := b.subscribe(t, ctx)
	got := make(chan []byte, 1)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- body:
		default:
		}
	}))
	defer dest.Close()
	cs := newClaimStore(t)
	inst := fixture.InstanceWith(t, "claims-threshold", func(cfg *config.Config) {
		claimRoles(cfg, cs, config.RoleEdge, config.RoleDispatch)
		src := b.source()
		src.Sinks[1].Options["inline_max_bytes"] = 1024
		src.Sinks = append(src.Sinks, config.SinkSpec{Type: "http", Options: map[string]any{"url": dest.URL}})
		cfg.Sources = map[string]config.Source{"gh": src}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})

	body := make([]byte, 4096)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	post(t, inst.IngestAddr(), body)
	fromNATS, fromRedis := b.natsMessage(t), redisMessage(t, ctx, sub)
	if fromNATS.Claim != fromRedis.Claim {
		t.Fatalf("sinks carry different claims: nats %s, redis %s", fromNATS.Claim, fromRedis.Claim)
	}
	redeem(t, ctx, inst, fromNATS, body)
	select {
	case h := <-got:
		if !bytes.Equal(h, body) {
			t.Fatalf("the HTTP destination got %d bytes, want the %d posted", len(h), len(body))
		}
	case <-ctx.Done():
		t.Fatal("the HTTP destination got nothing")
	}
}
