package test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/Admiral-Piett/goaws/app/servertest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/sirupsen/logrus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/reference"
	"github.com/ankusa-go/ankusa/test/services"
)

// backlogSize is how many hooks BenchmarkBacklogDrain stores before dispatch starts
// (ANKUSA_BENCH_BACKLOG, default 100,000).
func backlogSize() int {
	if n, err := strconv.Atoi(os.Getenv("ANKUSA_BENCH_BACKLOG")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// backlogConcurrency is dispatch.concurrency for BenchmarkBacklogDrain
// (ANKUSA_BENCH_DISPATCH_CONCURRENCY, default the config's): how many attempts a sink is
// handed at once, so how many hooks a sink that coalesces concurrent publishes can batch.
func backlogConcurrency() int {
	if n, err := strconv.Atoi(os.Getenv("ANKUSA_BENCH_DISPATCH_CONCURRENCY")); err == nil && n > 0 {
		return n
	}
	return config.Default().Dispatch.Concurrency
}

// backlogTarget is one sink BenchmarkBacklogDrain drains to. start brings up its
// destination (a topic, stream, queue or channel of the run's own, removed through
// b.Cleanup) and a consumer that adds every message it receives to received, and
// returns the sink entry that publishes there; false when the machine's service is down
// outside CI (under CI=true a service that is down fails the benchmark). A target
// without a consumer (the reference) counts what the sink confirmed.
type backlogTarget struct {
	name     string
	start    func(b *testing.B, received *atomic.Int64) (config.SinkSpec, bool)
	consumer bool
}

// backlogTargets are the broker sinks of the builtin registry, after the reference: the
// log sink, which confirms without leaving the process, so its figure is what dispatch
// and the store reach on this machine in this run, the ceiling of every broker sink. A
// broker sink added to the registry joins the benchmark with an entry here.
var backlogTargets = []backlogTarget{
	{name: "log-reference", start: func(*testing.B, *atomic.Int64) (config.SinkSpec, bool) {
		return config.SinkSpec{Type: "log"}, true
	}},
	{name: "kafka", start: startKafkaBacklog, consumer: true},
	{name: "nats", start: startNATSBacklog, consumer: true},
	{name: "rabbitmq", start: startRabbitBacklog, consumer: true},
	{name: "redis", start: startRedisBacklog, consumer: true},
	{name: "sqs", start: startSQSBacklog, consumer: true},
	{name: "google_pubsub", start: startPubSubBacklog, consumer: true},
}

// BenchmarkBacklogDrain is the backlog figure of `make bench`: per broker sink, an
// instance's store holds ANKUSA_BENCH_BACKLOG hooks of 1 KiB (committed through the store
// while no dispatch runs), then the instance starts with dispatch (default settings: 32
// attempts at once, unless ANKUSA_BENCH_DISPATCH_CONCURRENCY says otherwise) and the
// clock runs until the store holds no pending, scheduled or in-flight row and a real
// consumer of the destination received every hook.
// It reports hooks/s received by the consumer (hooks/s), hooks/s confirmed by the sink
// (confirmed/s: the store drained) and the mean duration of one successful attempt, and
// first the same for the log sink, dispatch's own ceiling in this run. The
// clock starts before the instance does, so the figures include its boot and the sink's
// first connection. The drain runs once, whatever b.N.
func BenchmarkBacklogDrain(b *testing.B) {
	tuneLikeTheBinary(b)
	n := backlogSize()
	for _, tg := range backlogTargets {
		b.Run(tg.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if i > 0 {
					break
				}
				var received atomic.Int64
				spec, ok := tg.start(b, &received)
				if !ok {
					b.Skip("service down")
				}
				drainBacklog(b, tg.name, spec, n, tg.consumer, &received)
			}
		})
	}
}

// drainBacklog seeds n hooks for spec into a fresh data dir, starts an instance on it
// with dispatch, and reports how fast the backlog reaches the consumer.
func drainBacklog(b *testing.B, name string, spec config.SinkSpec, n int, consumer bool, received *atomic.Int64) {
	b.Helper()
	dir := b.TempDir()
	inst := "backlog-" + name
	cfg := config.Default()
	cfg.Instance, cfg.Node.DataDir = inst, dir
	seedStart := time.Now()
	if err := reference.SeedBacklog(cfg.StoreDir(), spec.Type, n); err != nil {
		b.Fatal(err)
	}
	benchf(b, "%s: %d hooks of 1 KiB stored in %v", name, n, time.Since(seedStart).Round(time.Millisecond))

	start := time.Now()
	in := fixture.InstanceWith(b, inst, func(c *config.Config) {
		c.Node.DataDir = dir
		c.Node.Roles = []string{"edge", "dispatch"}
		c.Admin.Enabled = false
		c.Dispatch.Concurrency = backlogConcurrency()
		c.Sources = map[string]config.Source{"sample": {Tenant: "default", Sinks: []config.SinkSpec{spec}}}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(b)).Level(zerolog.ErrorLevel)})
	db := in.Store()
	if db == nil {
		b.Fatal("the instance has no store")
	}
	if next := db.NextSeq(); next < uint64(n) {
		b.Fatalf("the instance's store is at seq %d, %d hooks were stored", next, n)
	}
	var confirmed time.Duration
	deadline := start.Add(time.Duration(n/200)*time.Second + 2*time.Minute) // 200 hooks/s at the least
	// The pace over the drain, every 10 s (confirmed/received): a destination that slows
	// as it fills (goaws scans its queue on every call) shows here, where the mean hides
	// it. It is logged on one line after the summary: the testing package keeps only the
	// first ten lines of a benchmark's log.
	nextLog := start.Add(10 * time.Second)
	pace := ""
	for {
		now := time.Now()
		c := db.Counts()
		if now.After(nextLog) {
			nextLog = nextLog.Add(10 * time.Second)
			pace += fmt.Sprintf(" %v:%d/%d", now.Sub(start).Round(time.Second), int64(n)-(c.Pending+c.Scheduled+c.Inflight), received.Load())
		}
		if confirmed == 0 && c.Pending+c.Scheduled+c.Inflight == 0 {
			confirmed = now.Sub(start)
			if !consumer {
				received.Store(int64(n))
			}
		}
		if confirmed != 0 && received.Load() >= int64(n) {
			break
		}
		if now.After(deadline) {
			b.Fatalf("%s: after %v the store holds %+v and the consumer received %d of %d; attempts %s; pace%s",
				name, now.Sub(start).Round(time.Second), c, received.Load(), n, attemptsByResult(in, spec.Type), pace)
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	m := in.Telemetry().Metrics.Dispatch
	var okAttempts dto.Metric
	_ = m.AttemptDuration.WithLabelValues(spec.Type, telemetry.ResultOK).(prometheus.Metric).Write(&okAttempts)
	h := okAttempts.GetHistogram()
	mean := time.Duration(h.GetSampleSum() / float64(max(h.GetSampleCount(), 1)) * float64(time.Second))
	got := received.Load()
	if !consumer {
		benchf(b, "%s: %d hooks confirmed in %v (%.0f hooks/s); mean successful attempt %v; attempts %s",
			name, n, confirmed.Round(time.Millisecond), float64(n)/confirmed.Seconds(), mean.Round(time.Microsecond),
			attemptsByResult(in, spec.Type))
	} else {
		benchf(b, "%s: %d hooks confirmed in %v (%.0f hooks/s), received by the consumer in %v (%.0f hooks/s); mean successful attempt %v; attempts %s; %d received twice",
			name, n, confirmed.Round(time.Millisecond), float64(n)/confirmed.Seconds(), elapsed.Round(time.Millisecond),
			float64(n)/elapsed.Seconds(), mean.Round(time.Microsecond), attemptsByResult(in, spec.Type), got-int64(n))
	}
	if pace != "" {
		benchf(b, "%s: pace (elapsed:confirmed/received)%s", name, pace)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "hooks/s")
	b.ReportMetric(float64(n)/confirmed.Seconds(), "confirmed/s")
	b.ReportMetric(float64(mean)/1e6, "attempt_ms")
	if err := in.Stop(); err != nil {
		b.Fatal(err)
	}
}

// attemptsByResult is the instance's count of attempts to sinks of type typ by result
// (ankusa_dispatch_deliveries_total), the results that occurred only.
func attemptsByResult(in *instance.Instance, typ string) string {
	out := ""
	for _, r := range []string{telemetry.ResultOK, telemetry.ResultRetry, telemetry.ResultTimeout, telemetry.ResultError,
		telemetry.ResultParked, telemetry.ResultDLQ} {
		var m dto.Metric
		_ = in.Telemetry().Metrics.Dispatch.Deliveries.WithLabelValues(r, typ).Write(&m)
		if v := int64(m.GetCounter().GetValue()); v > 0 {
			out += fmt.Sprintf(" %s=%d", r, v)
		}
	}
	if out == "" {
		return "none"
	}
	return out[1:]
}

// consume runs fn on a goroutine until the run ends: fn returns when ctx is done.
func consume(b *testing.B, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); fn(ctx) }()
	b.Cleanup(func() { cancel(); wg.Wait() })
}

// startKafkaBacklog: a three-broker kfake cluster (acks=all waits for the in-sync
// replicas) with a topic of three partitions, read by a franz-go consumer.
func startKafkaBacklog(b *testing.B, received *atomic.Int64) (config.SinkSpec, bool) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "hooks"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close) // the topic goes with the cluster
	brokers := make([]any, 0, 3)
	for _, a := range c.ListenAddrs() {
		brokers = append(brokers, a)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("hooks"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	consume(b, func(ctx context.Context) {
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			received.Add(int64(fs.NumRecords()))
		}
	})
	return config.SinkSpec{Type: "kafka", Options: map[string]any{"brokers": brokers, "topic": "hooks"}}, true
}

// startNATSBacklog: a stream of its own on the machine's JetStream server (file storage,
// as a deployment would keep hooks), read by an ordered consumer, deleted at the end.
func startNATSBacklog(b *testing.B, received *atomic.Int64) (config.SinkSpec, bool) {
	nc, err := nats.Connect("nats://"+services.NATSAddr, nats.Timeout(2*time.Second))
	if err != nil {
		return serviceDown(b, "NATS", services.NATSAddr, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		b.Fatal(err)
	}
	u := strconv.FormatInt(time.Now().UnixNano(), 36)
	name, subject := "ANKUSA_BACKLOG_"+u, "ankusa.backlog."+u
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage})
	if err != nil {
		nc.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = js.DeleteStream(context.Background(), name)
		nc.Close()
	})
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := cons.Consume(func(jetstream.Msg) { received.Add(1) })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cc.Stop)
	return config.SinkSpec{Type: "nats", Options: map[string]any{"servers": []any{"nats://" + services.NATSAddr}, "subject": subject}}, true
}

// startRabbitBacklog: a durable exchange and queue of its own on the machine's RabbitMQ
// (persistent messages, confirmed once queued durably), read by an auto-ack consumer on
// a connection of its own, both deleted at the end.
func startRabbitBacklog(b *testing.B, received *atomic.Int64) (config.SinkSpec, bool) {
	name, ok := rabbitTopology(b, "ankusa-backlog-")
	if !ok {
		return config.SinkSpec{}, false
	}
	cconn, err := amqp.Dial(services.RabbitMQURL)
	if err != nil {
		b.Fatal(err)
	}
	cch, err := cconn.Channel()
	if err != nil {
		_ = cconn.Close()
		b.Fatal(err)
	}
	deliveries, err := cch.Consume(name, "", true, false, false, false, nil)
	if err != nil {
		_ = cconn.Close()
		b.Fatal(err)
	}
	consume(b, func(ctx context.Context) {
		// Closing the connection closes deliveries; drain it so the library's goroutine ends.
		go func() { <-ctx.Done(); _ = cconn.Close() }()
		for range deliveries {
			received.Add(1)
		}
	})
	return config.SinkSpec{Type: "rabbitmq", Options: map[string]any{"url": services.RabbitMQURL, "exchange": name}}, true
}

// startRedisBacklog: a channel of its own on the machine's Redis with one subscriber
// (subscribed before dispatch starts: a publish nobody receives is an error).
func startRedisBacklog(b *testing.B, received *atomic.Int64) (config.SinkSpec, bool) {
	c := redis.NewClient(&redis.Options{Addr: services.RedisAddr, DisableIdentity: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return serviceDown(b, "Redis", services.RedisAddr, err)
	}
	channel := "ankusa-backlog-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sub := c.Subscribe(context.Background(), channel)
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		_ = sub.Close()
		_ = c.Close()
		b.Fatal(err)
	}
	// A deep buffer: a subscriber that falls 32 MB behind is cut off by the server.
	msgs := sub.Channel(redis.WithChannelSize(65536))
	consume(b, func(ctx context.Context) {
		defer c.Close()
		defer sub.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case <-msgs:
				received.Add(1)
			}
		}
	})
	return config.SinkSpec{Type: "redis", Options: map[string]any{"url": "redis://" + services.RedisAddr, "channel": channel}}, true
}

// startSQSBacklog: a goaws server of the run's own (goaws keeps its queues in package
// state: one server at a time per process) with a standard queue, read by consumers that
// receive up to ten messages per call and delete them, as a consuming program would.
func startSQSBacklog(b *testing.B, received *atomic.Int64) (config.SinkSpec, bool) {
	// goaws logs every message body at info level through logrus's global logger.
	prev := logrus.StandardLogger().Out
	logrus.SetOutput(io.Discard)
	b.Cleanup(func() { logrus.SetOutput(prev) })
	// A fixed port, not :0: goaws writes the port it was given into every queue URL.
	port := freePort(b)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	srv, err := servertest.New(addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Quit() })
	endpoint := "http://" + addr
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	b.Cleanup(tr.CloseIdleConnections)
	client := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), HTTPClient: &http.Client{Transport: tr}})
	name := "ankusa-backlog-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		b.Fatal(err)
	}
	queue := aws.ToString(out.QueueUrl)
	b.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: &queue}) })
	// Four receivers: goaws scans the whole queue on every call, so a consumer that falls
	// behind the sink slows the sink's sends too, until its attempts time out.
	for range 4 {
		consume(b, func(ctx context.Context) {
			for ctx.Err() == nil {
				got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
				if err != nil || len(got.Messages) == 0 {
					continue
				}
				del := make([]sqstypes.DeleteMessageBatchRequestEntry, len(got.Messages))
				for i, m := range got.Messages {
					del[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
				}
				_, _ = client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &queue, Entries: del})
				received.Add(int64(len(got.Messages)))
			}
		})
	}
	return config.SinkSpec{Type: "sqs", Options: map[string]any{"queue_url": queue, "endpoint": endpoint,
		"credentials": map[string]any{"access_key_id": "test", "secret_access_key": "test"}}}, true
}

// startPubSubBacklog: a pstest server of the run's own (the client library's in-process
// Pub/Sub) with a topic and a subscription, read by a consumer that pulls up to 1,000
// messages per call and acknowledges them; the topic goes with the server.
func startPubSubBacklog(b *testing.B, received *atomic.Int64) (config.SinkSpec, bool) {
	const project, topic = "ankusa-bench", "hooks"
	srv := pstest.NewServer()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = srv.Close()
		b.Fatal(err)
	}
	client, err := pubsub.NewClient(context.Background(), project, option.WithGRPCConn(conn), option.WithTelemetryDisabled())
	if err != nil {
		_ = conn.Close()
		_ = srv.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = client.Close()
		_ = conn.Close()
		_ = srv.Close()
	})
	name := "projects/" + project + "/topics/" + topic
	if _, err := client.TopicAdminClient.CreateTopic(context.Background(), &pubsubpb.Topic{Name: name}); err != nil {
		b.Fatal(err)
	}
	sub := "projects/" + project + "/subscriptions/" + topic + "-sub"
	if _, err := client.SubscriptionAdminClient.CreateSubscription(context.Background(), &pubsubpb.Subscription{Name: sub, Topic: name}); err != nil {
		b.Fatal(err)
	}
	// Pull and Acknowledge, the RPCs a subscriber runs on: pstest hands a streaming-pull
	// Receive about 80 messages/s on this machine, far below what the sink publishes.
	consume(b, func(ctx context.Context) {
		for ctx.Err() == nil {
			got, err := client.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: sub, MaxMessages: 1000})
			if err != nil || len(got.ReceivedMessages) == 0 {
				continue
			}
			ids := make([]string, len(got.ReceivedMessages))
			for i, m := range got.ReceivedMessages {
				ids[i] = m.AckId
			}
			_ = client.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: sub, AckIds: ids})
			received.Add(int64(len(ids)))
		}
	})
	return config.SinkSpec{Type: "google_pubsub", Options: map[string]any{"project": project, "topic": topic, "endpoint": srv.Addr, "auth": "none"}}, true
}

// serviceDown fails the benchmark under CI=true and otherwise says why the sink is left out.
// rabbitTopology declares a durable topic exchange and a durable queue bound to it for every ankusa.* key, both
// named prefix + a fresh suffix and deleted when b ends, on the machine's RabbitMQ; false (or a failure under
// CI=true) when RabbitMQ is down.
func rabbitTopology(b *testing.B, prefix string) (string, bool) {
	b.Helper()
	conn, err := amqp.Dial(services.RabbitMQURL)
	if err != nil {
		_, ok := serviceDown(b, "RabbitMQ", services.RabbitMQAddr, err)
		return "", ok
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		b.Fatal(err)
	}
	name := prefix + strconv.FormatInt(time.Now().UnixNano(), 36)
	b.Cleanup(func() {
		_, _ = ch.QueueDelete(name, false, false, false)
		_ = ch.ExchangeDelete(name, false, false)
		_ = conn.Close()
	})
	if err := ch.ExchangeDeclare(name, "topic", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	if err := ch.QueueBind(name, "ankusa.#", name, false, nil); err != nil {
		b.Fatal(err)
	}
	return name, true
}

func serviceDown(b *testing.B, name, addr string, err error) (config.SinkSpec, bool) {
	b.Helper()
	if services.CI() {
		b.Fatalf("%s is not reachable on %s: %v (CI=true: a benchmark whose service is down fails)", name, addr, err)
	}
	benchf(b, "%s is not reachable on %s: %v", name, addr, err)
	return config.SinkSpec{}, false
}
