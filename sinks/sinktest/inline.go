package sinktest

import (
	"context"
	"errors"
	"testing"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
)

// InlineLimit is inventory D.5 for a sink s built with inline_max_bytes 16: s says 16 (the dispatcher checks
// bodies in by it); a 17-byte body without a claim is refused as Permanent with tooLarge (no retry makes it
// smaller) and nothing reaches the destination; with a claim the hook travels as its ref, stating the body's
// size. payloads returns what the destination holds for a hook id.
func InlineLimit(t *testing.T, s sinks.Sink, tooLarge error, payloads func(id string) [][]byte) {
	t.Helper()
	if l, ok := s.(sinks.InlineLimiter); !ok || l.InlineMaxBytes() != 16 {
		t.Fatalf("the sink does not say its inline_max_bytes of 16 (InlineLimiter %v)", ok)
	}
	e := Envelope(Binary(17))
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	err := s.Deliver(ctx, e)
	if cl, _ := sinks.Classify(err); !errors.Is(err, tooLarge) || cl != sinks.PermanentClass {
		t.Fatalf("oversize without claim: %v (%s), want permanent %v", err, cl, tooLarge)
	}
	if got := payloads(e.IDText); len(got) != 0 {
		t.Fatalf("an oversize hook without a claim reached the destination (%d messages)", len(got))
	}
	e.Claim = message.ClaimRef("acme", "01J9ZQ5K8E6VX2W4Y3T1R0P9M0")
	if err := s.Deliver(ctx, e); err != nil {
		t.Fatalf("claimed hook: %v", err)
	}
	got := payloads(e.IDText)
	if len(got) != 1 {
		t.Fatalf("claimed hook: %d messages, want 1", len(got))
	}
	m, err := message.Decode(got[0])
	if err != nil || m.Inline() || m.Claim != e.Claim || m.Size != 17 {
		t.Fatalf("claimed message: %+v, %v", m, err)
	}
}

// OfHook returns the payloads that decode to hook id, for a destination that lists everything it holds. A
// payload that is not Message v1 fails the test.
func OfHook(t testing.TB, id string, payloads [][]byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range payloads {
		m, err := message.Decode(p)
		if err != nil {
			t.Fatalf("the destination holds a message that is not Message v1: %v", err)
		}
		if m.ID == id {
			out = append(out, p)
		}
	}
	return out
}
