package store

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A record sent as its own envelope reaches a receiver with middleware as itself, with no envelope made for it.
func TestPendingEnvelope(t *testing.T) {
	p := NewPending()
	env, ok := p.Envelope().(*actor.MessageEnvelope)
	if !ok || env.Message != p || env.Sender != nil || env.Header != nil {
		t.Fatalf("Envelope() = %#v, want an envelope holding the record alone", p.Envelope())
	}
	if got := actor.UnwrapEnvelopeMessage(p.Envelope()); got != p {
		t.Fatalf("unwrapped %v, want the record", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = actor.WrapEnvelope(p.Envelope()) }); n != 0 {
		t.Fatalf("wrapping the record's envelope allocated %v times", n)
	}
	bare := &Pending{}
	if bare.Envelope() != any(bare) {
		t.Fatal("a Pending not made by NewPending is not sent bare")
	}
}

// A batch made by NewBatch travels to the writer and its BatchDone back without an envelope made for either.
func TestBatchEnvelopes(t *testing.T) {
	recs := []*Pending{NewPending(), NewPending()}
	b := NewBatch(3, recs, nil, nil)
	if got := actor.UnwrapEnvelopeMessage(b.Envelope()); got != b {
		t.Fatalf("the batch's envelope holds %v", got)
	}
	done, ok := actor.UnwrapEnvelopeMessage(b.Done()).(*BatchDone)
	if !ok || *done != (BatchDone{Partition: 3, Records: 2}) {
		t.Fatalf("Done() = %#v, want partition 3's BatchDone of 2 records", actor.UnwrapEnvelopeMessage(b.Done()))
	}
	if n := testing.AllocsPerRun(100, func() {
		_ = actor.WrapEnvelope(b.Envelope())
		_ = actor.WrapEnvelope(b.Done())
	}); n != 0 {
		t.Fatalf("wrapping the batch's messages allocated %v times", n)
	}
	bare := &Batch{Partition: 1, Records: recs[:1]}
	if bare.Envelope() != any(bare) {
		t.Fatal("a Batch not made by NewBatch is not sent bare")
	}
	if d := bare.Done().(*BatchDone); *d != (BatchDone{Partition: 1, Records: 1}) {
		t.Fatalf("a bare batch's Done() = %#v", d)
	}
}

// A batch counted on an Inflight takes itself off the count when it finishes, and its BatchDone reaches the
// batcher only while the batcher waits for room: one message for the wait, none otherwise.
func TestInflightBatchDoneOnlyWhileWaiting(t *testing.T) {
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	dones := make(chan *BatchDone, 8)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if d, ok := c.Message().(*BatchDone); ok {
			dones <- d
		}
	}))
	f := new(Inflight)
	const max = 2
	var batches []*Batch
	for f.Take(max) {
		batches = append(batches, NewBatch(0, []*Pending{NewPending()}, pid, f))
	}
	if len(batches) != max || f.InFlight() != max {
		t.Fatalf("took %d batches (%d in flight), want %d", len(batches), f.InFlight(), max)
	}
	batches[0].Finish(system.Root) // the batcher is not waiting: no message
	if f.InFlight() != 1 {
		t.Fatalf("%d in flight after one finished, want 1", f.InFlight())
	}
	if !f.Take(max) {
		t.Fatal("no room after a batch finished")
	}
	batches[0] = NewBatch(0, []*Pending{NewPending()}, pid, f)
	if !f.Wait(max) {
		t.Fatal("Wait with no room reported room")
	}
	batches[1].Finish(system.Root) // the batcher waits: one BatchDone
	select {
	case d := <-dones:
		if d.Records != 1 {
			t.Fatalf("BatchDone of %d records, want 1", d.Records)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a batch finished while the batcher waited, and no BatchDone came")
	}
	batches[0].Finish(system.Root) // the wait was answered: no further message
	select {
	case d := <-dones:
		t.Fatalf("a BatchDone came while the batcher did not wait: %+v", d)
	case <-time.After(100 * time.Millisecond):
	}
	if f.InFlight() != 0 {
		t.Fatalf("%d in flight after all finished", f.InFlight())
	}
	if f.Wait(max) {
		t.Fatal("Wait with room reported none")
	}
}
