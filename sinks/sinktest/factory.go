package sinktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/message"
)

// Secret is the password, token or key a test puts into a sink's options to prove it is never echoed.
const Secret = "hunter2"

// NewSink builds a sink of type typ with opts through its factory, as an instance does (instance "n1", logs
// discarded). It is closed when the test ends; Close is idempotent, so the test may close it earlier.
func NewSink(t testing.TB, factory sinks.Factory, typ string, opts map[string]any) sinks.Sink {
	t.Helper()
	s, err := factory(config.SinkSpec{Type: typ, Options: opts}, sinks.Deps{Instance: "n1", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// RefusesOptions requires factory to refuse opts with sinks.ErrInvalidOption, in an error that says every one
// of wants and never Secret: an option problem names the option, never its value (options carry passwords).
func RefusesOptions(t testing.TB, factory sinks.Factory, typ string, opts map[string]any, wants ...string) {
	t.Helper()
	s, err := factory(config.SinkSpec{Type: typ, Options: opts}, sinks.Deps{})
	if err == nil {
		_ = s.Close()
		t.Fatalf("%v: accepted, want ErrInvalidOption", opts)
	}
	if !errors.Is(err, sinks.ErrInvalidOption) {
		t.Fatalf("%v: err = %v, want ErrInvalidOption", opts, err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%v: %q does not say %q", opts, err, w)
		}
	}
	if strings.Contains(err.Error(), Secret) {
		t.Fatalf("an option error echoes a secret: %v", err)
	}
}

// Bodies decodes payloads as Message v1 and returns their bodies, in order.
func Bodies(payloads [][]byte) ([][]byte, error) {
	out := make([][]byte, 0, len(payloads))
	for i, p := range payloads {
		m, err := message.Decode(p)
		if err != nil {
			return nil, fmt.Errorf("message %d of %d: %w", i+1, len(payloads), err)
		}
		out = append(out, m.Body())
	}
	return out, nil
}

// ReceivedMessages is Target.Received for a destination that holds Message v1 payloads: the bodies of
// payloads (what the destination holds for one hook), false when it holds none. A payload that does not
// decode fails the test.
func ReceivedMessages(t testing.TB, payloads [][]byte) ([][]byte, bool) {
	t.Helper()
	if len(payloads) == 0 {
		return nil, false
	}
	out, err := Bodies(payloads)
	if err != nil {
		t.Fatal(err)
	}
	return out, true
}

// Filed keeps the bodies of Message v1 payloads by the hook id each names: Target.Received for a destination
// that lists everything it holds instead of one hook's messages (goaws, pstest). The zero value is ready.
type Filed struct{ bodies map[string][][]byte }

// Add decodes payload and files its body under its hook id; a payload that is not Message v1 fails the test.
// The caller adds each payload once.
func (f *Filed) Add(t testing.TB, payload []byte) {
	t.Helper()
	m, err := message.Decode(payload)
	if err != nil {
		t.Fatalf("the destination holds a message that is not Message v1: %v", err)
	}
	if f.bodies == nil {
		f.bodies = make(map[string][][]byte)
	}
	f.bodies[m.ID] = append(f.bodies[m.ID], m.Body())
}

// Received returns the bodies filed for hook id, false if none.
func (f *Filed) Received(id string) ([][]byte, bool) {
	b, ok := f.bodies[id]
	return b, ok
}

// Deliver runs one attempt of e on s under a deadline of within, as a lane does.
func Deliver(s sinks.Sink, e *sinks.Envelope, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return s.Deliver(ctx, e)
}
