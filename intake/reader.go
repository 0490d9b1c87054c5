package intake

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ankusa-go/ankusa/sinks/kafkasink"
)

// Reader reads the intake topic back (boot recovery).
type Reader interface {
	// Read calls fn for every record of the topic from `from` (next offset per partition; a partition absent
	// from it is read from its start) up to the end offsets at the call, and returns those end offsets.
	Read(ctx context.Context, from map[int32]int64, fn func(partition int32, offset int64, value []byte) error) (map[int32]int64, error)
}

// Read implements Reader with a consumer client of its own.
func (l *Log) Read(ctx context.Context, from map[int32]int64, fn func(int32, int64, []byte) error) (map[int32]int64, error) {
	end, err := l.endOffsets(ctx)
	if err != nil {
		return nil, err
	}
	start := map[int32]kgo.Offset{}
	want := 0
	next := map[int32]int64{}
	for p, e := range end {
		o, ok := from[p]
		if !ok {
			o = 0
		}
		if o < e {
			start[p] = kgo.NewOffset().At(o)
			next[p] = o
			want++
		}
	}
	if want == 0 {
		return end, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.opts.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.opts.Topic: start}),
		kgo.FetchMaxBytes(64<<20), kgo.WithLogger(kafkasink.Logger(l.opts.Log)))
	if err != nil {
		return nil, fmt.Errorf("intake: cannot configure the reader: %w", err)
	}
	defer cl.Close()
	for want > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("intake: reading topic %s back: %w", l.opts.Topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("intake: fetch of partition %d: %w", p, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		var cbErr error
		fs.EachRecord(func(r *kgo.Record) {
			if cbErr != nil || r.Offset >= end[r.Partition] {
				return
			}
			if err := fn(r.Partition, r.Offset, r.Value); err != nil {
				cbErr = err
				return
			}
			next[r.Partition] = r.Offset + 1
		})
		if cbErr != nil {
			return nil, cbErr
		}
		want = 0
		for p := range start {
			if next[p] < end[p] {
				want++
			}
		}
	}
	return end, nil
}

// endOffsets lists the high watermark of every partition of the topic.
func (l *Log) endOffsets(ctx context.Context) (map[int32]int64, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(l.opts.Topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, l.cl)
	if err != nil {
		return nil, fmt.Errorf("intake: metadata of topic %s: %w", l.opts.Topic, err)
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("intake: metadata of topic %s: %d topics", l.opts.Topic, len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("intake: topic %s: %w", l.opts.Topic, err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = l.opts.Topic
	for _, p := range mresp.Topics[0].Partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p.Partition, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, l.cl)
	if err != nil {
		return nil, fmt.Errorf("intake: end offsets of topic %s: %w", l.opts.Topic, err)
	}
	end := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("intake: end offset of partition %d: %w", p.Partition, err)
			}
			end[p.Partition] = p.Offset
		}
	}
	return end, nil
}
