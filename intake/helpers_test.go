package intake_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ankusa-go/ankusa/intake"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
)

const topic = "ankusa-intake"

func newCluster(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func newLog(t *testing.T, brokers []string, node string) *intake.Log {
	t.Helper()
	l, err := intake.NewLog(intake.LogOptions{Brokers: brokers, Topic: topic, Node: node,
		PublishTimeout: 5 * time.Second, MaxRecordBytes: 1 << 20, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func openStore(t *testing.T, faults *store.Faults) *store.DB {
	t.Helper()
	db, err := store.Open(store.Options{Dir: t.TempDir(), Log: zerolog.Nop(), Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newDual(t *testing.T, db *store.DB, l *intake.Log, node string) *intake.Dual {
	t.Helper()
	return intake.New(intake.Options{DB: func() *store.DB { return db }, Log: l, Reader: l, Node: node, Breaker: 3,
		MaxInflight: 4, ReconcileInterval: 50 * time.Millisecond, Tel: telemetry.New("t", zerolog.Nop()), Logger: zerolog.Nop()})
}

// record is a hook of source "src" with one http sink and a dedupe key.
func record(t *testing.T, n int) *store.Record {
	t.Helper()
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, `{"n":%d}`, n)
	h := store.Hook{ID: id, ReceivedAt: time.Now().UnixMilli(), Tenant: "t1", Source: "src", Body: body, DedupeKey: fmt.Sprint("ev-", n)}
	return &store.Record{ID: id, Tenant: "t1", Source: "src", ReceivedAt: h.ReceivedAt, Size: uint32(len(body)),
		Value: store.AppendHook(nil, &h), Sinks: []store.SinkBinding{{Index: 0, Type: "http"}},
		DedupeKey: h.DedupeKey, DedupeTTL: time.Hour}
}

func entry(r *store.Record, seq uint64) intake.Entry {
	return intake.Entry{Seq: seq, ID: r.ID, Bytes: store.AppendEntry(nil, r, seq)}
}

// publish writes one record of node holding entries, and waits for its confirm.
func publish(t *testing.T, l *intake.Log, entries ...intake.Entry) {
	t.Helper()
	if c := <-l.Publish(entries); c.Err != nil {
		t.Fatal(c.Err)
	}
}

// produceRaw writes a record value as is (a foreign node's record, or a corrupt one).
func produceRaw(t *testing.T, brokers []string, key string, value []byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// hooks returns the ids stored in db by seq.
func hooks(t *testing.T, db *store.DB) map[uint64][16]byte {
	t.Helper()
	out := map[uint64][16]byte{}
	if err := db.ForEachHook(func(seq uint64, h *store.Hook) error { out[seq] = h.ID; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
