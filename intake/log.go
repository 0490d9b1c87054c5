package intake

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ankusa-go/ankusa/sinks/kafkasink"
)

// Confirm is the outcome of one Publish: nil Err means every record of it was acknowledged by every in-sync
// replica; Offsets then holds, per partition, the highest offset it was written at.
type Confirm struct {
	Err     error
	Offsets map[int32]int64
	Took    time.Duration
}

// Publisher publishes a group's entries and reports the confirm on the returned channel (exactly once). Log
// implements it; tests wrap it to fail or hold publishes.
type Publisher interface {
	Publish(entries []Entry) <-chan Confirm
}

// LogOptions configures the intake log client.
type LogOptions struct {
	Brokers        []string
	Topic          string
	Node           string
	PublishTimeout time.Duration
	MaxRecordBytes int
	Log            zerolog.Logger
	// Extra client options (tests: a shorter metadata age).
	Extra []kgo.Opt
}

// Log is the producer side of the intake topic: acks=all with franz-go's idempotent producer, one partition per
// node (records are keyed by the node id), so a node's records keep their order.
type Log struct {
	opts   LogOptions
	cl     *kgo.Client
	ctx    context.Context
	cancel context.CancelFunc
}

// batchOverhead is what a record batch adds around one record, rounded up.
const batchOverhead = 512

// NewLog builds the client; it does not connect (the first publish dials).
func NewLog(o LogOptions) (*Log, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.DefaultProduceTopic(o.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(o.PublishTimeout),
		kgo.ProduceRequestTimeout(o.PublishTimeout),
		kgo.ProducerBatchMaxBytes(int32(max(1_000_012, o.MaxRecordBytes+batchOverhead))),
		kgo.MetadataMinAge(time.Second),
		kgo.WithLogger(kafkasink.Logger(o.Log)),
	}
	cl, err := kgo.NewClient(append(opts, o.Extra...)...)
	if err != nil {
		return nil, fmt.Errorf("intake: cannot configure the client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Log{opts: o, cl: cl, ctx: ctx, cancel: cancel}, nil
}

// Close fails the publishes still waiting and closes the connections.
func (l *Log) Close() {
	l.cancel()
	l.cl.Close()
}

// Client is the underlying client (recovery reads the topic through a client of its own).
func (l *Log) Options() LogOptions { return l.opts }

// Publish sends entries as records of at most intake.max_record_bytes each (one when they fit), keyed by the
// node id, and reports once every one was confirmed or the first failed; a confirm that does not come within
// the publish timeout is ErrTimeout (the record may still land: every reader dedupes).
func (l *Log) Publish(entries []Entry) <-chan Confirm {
	out := make(chan Confirm, 1)
	start := time.Now()
	recs := l.records(entries)
	var (
		mu      sync.Mutex
		left    = len(recs)
		offsets = map[int32]int64{}
		once    sync.Once
	)
	finish := func(err error) {
		once.Do(func() {
			mu.Lock()
			c := Confirm{Err: err, Took: time.Since(start)}
			if err == nil {
				c.Offsets = offsets
			}
			mu.Unlock()
			out <- c
		})
	}
	timer := time.AfterFunc(l.opts.PublishTimeout, func() { finish(ErrTimeout) })
	for _, r := range recs {
		l.cl.TryProduce(l.ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				timer.Stop()
				finish(fmt.Errorf("intake: cannot publish to topic %s: %w", l.opts.Topic, err))
				return
			}
			mu.Lock()
			if o, ok := offsets[r.Partition]; !ok || r.Offset > o {
				offsets[r.Partition] = r.Offset
			}
			left--
			done := left == 0
			mu.Unlock()
			if done {
				timer.Stop()
				finish(nil)
			}
		})
	}
	return out
}

// records splits entries into records within MaxRecordBytes (an entry larger than that goes alone).
func (l *Log) records(entries []Entry) []*kgo.Record {
	node := l.opts.Node
	if len(entries) == 0 {
		return []*kgo.Record{{Key: []byte(node), Value: AppendRecord(nil, node, nil)}}
	}
	var out []*kgo.Record
	start, size := 0, recordSize(node)
	for i, e := range entries {
		if i > start && size+entrySize(e) > l.opts.MaxRecordBytes {
			out = append(out, &kgo.Record{Key: []byte(node), Value: AppendRecord(nil, node, entries[start:i])})
			start, size = i, recordSize(node)
		}
		size += entrySize(e)
	}
	return append(out, &kgo.Record{Key: []byte(node), Value: AppendRecord(nil, node, entries[start:])})
}
