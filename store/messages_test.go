package store

import (
	"testing"

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
	b := NewBatch(3, recs, nil)
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
