package kafkasink

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/sinks/sinktest"
)

// testTopic is the topic every test cluster is seeded with, on testPartitions partitions.
const (
	testTopic      = "hooks"
	testPartitions = 3
)

// newCluster starts a kfake cluster of three brokers seeded with testTopic; it is closed when the test ends.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(testPartitions, testTopic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newTestSink builds a sink through the factory, as an instance does; opts override the defaults given here.
func newTestSink(t testing.TB, brokers []string, opts map[string]any) *sink {
	t.Helper()
	o := map[string]any{"brokers": anyList(brokers), "topic": testTopic}
	maps.Copy(o, opts)
	return sinktest.NewSink(t, New, Type, o).(*sink)
}

func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// consumer reads a topic back from the start and indexes its records by the ankusa_id header.
type consumer struct {
	t     testing.TB
	cl    *kgo.Client
	topic string
	mu    sync.Mutex
	next  map[int32]int64 // next offset to read per partition
	byID  map[string][]*kgo.Record
}

func newConsumer(t testing.TB, brokers []string, topic string) *consumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &consumer{t: t, cl: cl, topic: topic, next: map[int32]int64{}, byID: map[string][]*kgo.Record{}}
}

// records returns every record of hook id in the topic. It reads up to the end offsets the brokers report at
// the call, so a record acknowledged before the call is found without polling for it.
func (c *consumer) records(id string) []*kgo.Record {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	end, err := endOffsets(ctx, c.cl, c.topic)
	if err != nil {
		c.t.Fatalf("end offsets of %s: %v", c.topic, err)
	}
	for !c.reached(end) {
		fs := c.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			c.t.Fatalf("reading %s back: %v (read up to %v, end %v)", c.topic, err, c.next, end)
		}
		fs.EachError(func(_ string, p int32, err error) { c.t.Logf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			c.next[r.Partition] = r.Offset + 1
			for _, h := range r.Headers {
				if h.Key == message.AttrID {
					c.byID[string(h.Value)] = append(c.byID[string(h.Value)], r)
				}
			}
		})
	}
	return c.byID[id]
}

func (c *consumer) reached(end map[int32]int64) bool {
	for p, off := range end {
		if c.next[p] < off {
			return false
		}
	}
	return true
}

// endOffsets lists the high watermark of every partition of topic.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < testPartitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1 // -1: the latest offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

// payloads returns the values of the records of id.
func (c *consumer) payloads(id string) [][]byte {
	var out [][]byte
	for _, r := range c.records(id) {
		out = append(out, r.Value)
	}
	return out
}

// bodies decodes the records of id as Message v1 and returns their bodies.
func (c *consumer) bodies(id string) ([][]byte, error) { return sinktest.Bodies(c.payloads(id)) }
