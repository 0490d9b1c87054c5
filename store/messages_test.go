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
