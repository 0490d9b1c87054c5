package intake_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/intake"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
)

// slowPublisher delays every confirm by d (a slow in-sync replica).
type slowPublisher struct {
	intake.Publisher
	d time.Duration
}

func (s slowPublisher) Publish(entries []intake.Entry) <-chan intake.Confirm {
	out := make(chan intake.Confirm, 1)
	in := s.Publisher.Publish(entries)
	go func() {
		time.Sleep(s.d)
		out <- <-in
	}()
	return out
}

// TestAckCostsTheLargerOfFsyncAndConfirm proves the halves run in parallel (design: "the two halves run in
// parallel, so the ack costs the larger of the fsync and the confirm, not their sum"): with the local write
// held 300 ms and the confirm delayed 300 ms, a group is answered in well under the 600 ms of their sum.
func TestAckCostsTheLargerOfFsyncAndConfirm(t *testing.T) {
	const half = 300 * time.Millisecond
	brokers := newCluster(t)
	l := newLog(t, brokers, "node-a")
	db := openStore(t, &store.Faults{BeforeCommit: func() error { time.Sleep(half); return nil }})
	d := intake.New(intake.Options{DB: func() *store.DB { return db }, Log: slowPublisher{l, half}, Reader: l,
		Node: "node-a", Breaker: 3, MaxInflight: 4, ReconcileInterval: time.Second,
		Tel: telemetry.New("t", zerolog.Nop()), Logger: zerolog.Nop()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	// Warm the client's connection first: the first produce also dials and loads metadata.
	if c := <-l.Publish(nil); c.Err != nil {
		t.Fatal(c.Err)
	}
	start := time.Now()
	confirm, err := d.CommitHooksConfirm([]*store.Record{record(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := confirm(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("fsync held %v, confirm delayed %v: ack after %v", half, half, took.Round(time.Millisecond))
	if took >= 2*half-50*time.Millisecond {
		t.Fatalf("ack took %v: the halves ran one after the other (sum %v)", took, 2*half)
	}
}
