package edge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/telemetry"
)

// gated is a sink whose Deliver counts the calls running at once and waits until the
// gate opens (or its context ends); the gate opens once `open` calls run together.
type gated struct {
	running, peak, calls atomic.Int64
	open                 int64
	gate                 chan struct{}
	once                 sync.Once
}

func (g *gated) Deliver(ctx context.Context, _ *sinks.Envelope) error {
	g.calls.Add(1)
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	if n >= g.open {
		g.once.Do(func() { close(g.gate) })
	}
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gated) Durable() bool { return true }
func (g *gated) Close() error  { return nil }

// newGatedPublisher builds a publisher whose source "s" has n sinks, all g, with helpers
// free helper goroutines.
func newGatedPublisher(t *testing.T, g *gated, n, helpers int) *Publisher {
	t.Helper()
	reg := sinks.NewRegistry()
	reg.Register("gated", func(config.SinkSpec, sinks.Deps) (sinks.Sink, error) { return g, nil })
	cfg := config.Default()
	cfg.WAL.PublishTimeoutMS = 10_000
	src := config.Source{Tenant: "default"}
	for range n {
		src.Sinks = append(src.Sinks, config.SinkSpec{Type: "gated"})
	}
	cfg.Sources = map[string]config.Source{"s": src}
	p, err := NewPublisher(cfg, reg, telemetry.New("t", zerolog.Nop()), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.helpers = make(chan struct{}, helpers)
	t.Cleanup(p.Close)
	return p
}

// Publisher invariant 4: at most MaxPublishHelpers helpers run at once; with none free the
// request's goroutine runs the other sinks itself, after its own, under the same
// deadline. Three sinks and one free helper: two run at once (the request's and the
// helper's), never three, and all three confirm.
func TestPublishHelpersAreBounded(t *testing.T) {
	g := &gated{open: 2, gate: make(chan struct{})}
	p := newGatedPublisher(t, g, 3, 1)
	env := &sinks.Envelope{Source: "s"}
	if err := p.publish(p.routes["s"], env); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if calls, peak := g.calls.Load(), g.peak.Load(); calls != 3 || peak != 2 {
		t.Fatalf("%d calls, %d at once; want 3 calls, 2 at once (the request and its one helper)", calls, peak)
	}
	if len(p.helpers) != 0 {
		t.Fatalf("%d helper tokens still held after publish returned", len(p.helpers))
	}
}

// Publisher invariant 1: one deadline for all sinks. With no helper free and a gate that
// never opens (it needs two calls at once, and calls run one after another), every sink
// runs until the deadline and the verdict is publish_timeout.
func TestPublishWithoutHelpersRunsSinksInTurnUnderOneDeadline(t *testing.T) {
	g := &gated{open: 2, gate: make(chan struct{})}
	p := newGatedPublisher(t, g, 2, 0)
	p.timeout = 50 * time.Millisecond
	err := p.publish(p.routes["s"], &sinks.Envelope{Source: "s"})
	var r *RefusedError
	if !errors.As(err, &r) || r != refusePublishTimeout {
		t.Fatalf("publish: %v, want the publish_timeout refusal", err)
	}
	if calls, peak := g.calls.Load(), g.peak.Load(); calls != 2 || peak != 1 {
		t.Fatalf("%d calls, %d at once; want 2 calls one after another", calls, peak)
	}
}
