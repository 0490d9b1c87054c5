package edge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// MaxPublishHelpers bounds the goroutines that publish for requests at once under
// wal.type none, node-wide. A request runs its first sink on its own goroutine and asks
// a helper for each other one; with every helper busy it runs the rest itself, one after
// another, under the same deadline. 1024 helpers hold a few MiB of stacks at most.
const MaxPublishHelpers = 1024

// Publisher is the commit step of wal.type none (direct ack): it owns the sinks of every
// static source, built once at boot, and publishes a request's hook to all of them.
//
// Invariants:
//
//  1. publish reports success only when every sink of the source returned nil from
//     Deliver (sinks.SafeDeliver: a panic is an error) within wal.publish_timeout_ms, one
//     deadline for all of them. The edge answers 201 on nothing else.
//  2. Every Deliver a request starts has returned before publish returns: the envelope's
//     body is the request's pooled buffer. A sink ends a Deliver whose context ended
//     (the sink contract), so the deadline bounds the wait.
//  3. Nothing is retried here: one Deliver per sink per request. The provider's retry,
//     answered by the 503's Retry-After, is the retry; sinks that confirmed keep their copy.
//  4. At most MaxPublishHelpers helper goroutines run at once, all in one task group that
//     Close stops and waits for before it closes the sinks.
type Publisher struct {
	timeout time.Duration
	window  time.Duration
	routes  map[string]*directRoute // source id → its sinks
	all     []*directSink           // every sink, by source id then index: the /ready check's order
	tel     *telemetry.Telemetry
	log     zerolog.Logger
	helpers chan struct{} // one token per running helper
	claim   sinks.ClaimCheckIn
	// claimFailedAt is when a check-in last failed (unix ns): its warning is logged once per window.
	claimFailedAt atomic.Int64
	tasks         task.Group
	closed        sync.Once
}

// directRoute is one source's sinks and the forward policy they share.
type directRoute struct {
	forward sinks.Forward
	sinks   []*directSink
	// claimAt is the smallest inline_max_bytes of the sinks (sinks.ClaimThreshold); claims is false when no sink
	// has one and the route never checks a body in.
	claimAt int
	claims  bool
}

// envelope is h as the route's sinks see it: its stored headers through the source's
// forward policy. It shares h's body, which publish outlives (invariant 2), but copies the
// forwarded headers into memory of their own: a request's headers are views into its
// pooled scratch, and an HTTP transport may still be writing a request's head when a
// Deliver cut short by the deadline has returned.
func (rt *directRoute) envelope(h *store.Hook) sinks.Envelope {
	env := sinks.Envelope{
		ID: h.ID, Source: h.Source, Tenant: h.Tenant, ReceivedAt: h.ReceivedAt, ContentType: h.ContentType,
		Body: h.Body, DedupeKey: h.DedupeKey, Flagged: h.Flagged, Verification: h.Verification.String(), Attempt: 1,
	}
	env.IDText = env.Text()
	if len(h.Headers) == 0 {
		return env
	}
	hs := make([]sinks.Header, len(h.Headers))
	for i, x := range h.Headers {
		hs[i] = sinks.Header{Name: x.Name, Value: x.Value}
	}
	hs = rt.forward.Headers(hs) // a new slice; its strings still share h's memory
	n := 0
	for _, x := range hs {
		n += len(x.Name) + len(x.Value)
	}
	buf := make([]byte, 0, n)
	for i, x := range hs {
		start := len(buf)
		buf = append(buf, x.Name...)
		buf = append(buf, x.Value...)
		hs[i] = sinks.Header{Name: view(buf[start : start+len(x.Name)]), Value: view(buf[start+len(x.Name):])}
	}
	env.Headers = hs
	return env
}

// directSink is one configured sink of one source and its recent health.
type directSink struct {
	source string
	index  int
	typ    string
	sink   sinks.Sink
	// failedAt is when its last publish failed (unix ns), 0 once one succeeded since.
	failedAt atomic.Int64
}

// FailingSink names a sink whose last publish failed within health.sink_error_window_ms:
// the source, the sink's index in its list and its type, never an option (a URL may
// hold credentials).
type FailingSink struct {
	Source string `json:"source_id"`
	Index  int    `json:"sink"`
	Type   string `json:"type"`
}

// NewPublisher builds the sinks of every configured source from reg. A sink that cannot
// be built fails here, at boot, and the sinks already built are closed. wrap, when not
// nil, wraps each built sink (tests inject faults with it).
func NewPublisher(cfg *config.Config, reg *sinks.Registry, tel *telemetry.Telemetry,
	wrap func(source string, index int, s sinks.Sink) sinks.Sink) (*Publisher, error) {
	p := &Publisher{
		timeout: time.Duration(cfg.WAL.PublishTimeoutMS) * time.Millisecond,
		window:  time.Duration(cfg.Health.SinkErrorWindowMS) * time.Millisecond,
		routes:  make(map[string]*directRoute, len(cfg.Sources)),
		tel:     tel,
		log:     tel.Log.With().Str("component", "publish").Logger(),
		helpers: make(chan struct{}, MaxPublishHelpers),
	}
	ids := make([]string, 0, len(cfg.Sources))
	for id := range cfg.Sources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	deps := sinks.Deps{Instance: cfg.Instance, Log: tel.Log}
	for _, id := range ids {
		src := cfg.Sources[id]
		rt := &directRoute{forward: sinks.Forward{Allow: src.ForwardHeaders, Proxy: src.ForwardProxyHeaders}}
		for i, spec := range src.Sinks {
			s, err := reg.New(spec, deps)
			if err != nil {
				p.Close()
				return nil, fmt.Errorf("edge: source %s sink %d: %w", id, i, err)
			}
			if wrap != nil {
				s = wrap(id, i, s)
			}
			ds := &directSink{source: id, index: i, typ: spec.Type, sink: s}
			rt.sinks = append(rt.sinks, ds)
			p.all = append(p.all, ds)
		}
		ss := make([]sinks.Sink, len(rt.sinks))
		for i, ds := range rt.sinks {
			ss[i] = ds.sink
		}
		rt.claimAt, rt.claims = sinks.ClaimThreshold(ss)
		p.routes[id] = rt
	}
	return p, nil
}

// Close waits for the helpers still running and closes every sink. The listener has
// stopped by then, so no request publishes any more. It is idempotent.
func (p *Publisher) Close() {
	p.closed.Do(func() {
		p.tasks.Stop()
		for _, s := range p.all {
			_ = s.sink.Close()
		}
	})
}

// FailingSinks lists the sinks whose last publish failed less than the window ago; nil
// when there are none.
func (p *Publisher) FailingSinks(now time.Time) []FailingSink {
	var out []FailingSink
	for _, s := range p.all {
		if s.failing(now, p.window) {
			out = append(out, FailingSink{Source: s.source, Index: s.index, Type: s.typ})
		}
	}
	return out
}

func (p *Publisher) anyFailing(now time.Time) bool {
	for _, s := range p.all {
		if s.failing(now, p.window) {
			return true
		}
	}
	return false
}

func (s *directSink) failing(now time.Time, window time.Duration) bool {
	at := s.failedAt.Load()
	return at != 0 && now.UnixNano()-at < int64(window)
}

// Results of one sink's publish, for the verdict and the metrics.
const (
	publishOK = iota
	publishRefused
	publishPanicked
	publishTimeout
)

// Refusals of a failed publish: 503 store_unavailable, the original's answer for a sink
// that refused or missed the deadline under wal: none (inventory A.3), with Retry-After 1
// and a reason saying which. No sink is named to the caller: which destinations a source
// has is the operator's business (/ready and the logs name them).
var (
	refuseSinkRefused    = &RefusedError{Status: 503, Reason: "store_unavailable", RetryAfter: 1, Detail: refusalDetail{"reason", `"sink_refused"`}}
	refuseSinkPanicked   = &RefusedError{Status: 503, Reason: "store_unavailable", RetryAfter: 1, Detail: refusalDetail{"reason", `"sink_panicked"`}}
	refusePublishTimeout = &RefusedError{Status: 503, Reason: "store_unavailable", RetryAfter: 1, Detail: refusalDetail{"reason", `"publish_timeout"`}}
)

// refuseClaimCheckIn answers a request whose body could not be checked in: no sink was asked, and the provider's
// retry checks it in again under the same pack id.
var refuseClaimCheckIn = &RefusedError{Status: 503, Reason: "store_unavailable", RetryAfter: 1, Detail: refusalDetail{"reason", `"claim_check_failed"`}}

// SetClaimCheck installs the claim check-in; call it before the listener starts. Without one, a body over a
// sink's inline limit reaches the sink unclaimed and the sink refuses it.
func (p *Publisher) SetClaimCheck(fn sinks.ClaimCheckIn) { p.claim = fn }

// errNoRoute: a source the publisher built no sinks for; static sources always have them.
var errNoRoute = errors.New("edge: source has no sinks to publish to")

// publish delivers env to every sink of rt concurrently under one deadline and returns
// nil only when all of them confirmed (invariant 1), or the refusal that names why not.
func (p *Publisher) publish(rt *directRoute, env *sinks.Envelope) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	if rt.claims && p.claim != nil && env.Claim == "" && len(env.Body) > rt.claimAt {
		// Inventory D.5: outside dispatch a one-claim pack whose id follows from the hook, checked in before any
		// sink runs and under the same deadline. The queue sinks carry the ref; the others ignore it.
		ref, err := p.claim(ctx, env)
		if err != nil {
			// One warning per window, not one per request; ankusa_claim_check_failures_total counts them all.
			now := time.Now().UnixNano()
			if prev := p.claimFailedAt.Swap(now); prev == 0 || now-prev >= int64(p.window) {
				p.log.Warn().Err(err).Str("source_id", env.Source).Int("bytes", len(env.Body)).
					Msg("cannot check a body in: such hooks are answered 503")
			}
			return refuseClaimCheckIn
		}
		env.Claim = ref
	}
	n := len(rt.sinks)
	if n == 1 {
		return verdict(p.deliver(ctx, rt.sinks[0], env))
	}
	results := make([]int, n)
	var wg sync.WaitGroup
	var inline []int // sinks no helper was free for
	for i := 1; i < n; i++ {
		if !p.help(&wg, func() { results[i] = p.deliver(ctx, rt.sinks[i], env) }) {
			inline = append(inline, i)
		}
	}
	results[0] = p.deliver(ctx, rt.sinks[0], env)
	for _, i := range inline {
		results[i] = p.deliver(ctx, rt.sinks[i], env)
	}
	wg.Wait() // invariant 2
	return verdict(slices.Max(results))
}

// help runs fn on a helper goroutine when one of the MaxPublishHelpers is free; false
// means it did not, and the caller runs fn itself.
func (p *Publisher) help(wg *sync.WaitGroup, fn func()) bool {
	select {
	case p.helpers <- struct{}{}:
	default:
		return false
	}
	wg.Add(1)
	started := p.tasks.Go(func(<-chan struct{}) {
		defer func() { <-p.helpers; wg.Done() }()
		fn() // bounded by the request's deadline, not by the group's stop
	})
	if !started {
		<-p.helpers
		wg.Done()
	}
	return started
}

// verdict maps the worst result of a publish to its answer: a missed deadline first,
// then a panic, then a refusal.
func verdict(worst int) error {
	switch worst {
	case publishOK:
		return nil
	case publishTimeout:
		return refusePublishTimeout
	case publishPanicked:
		return refuseSinkPanicked
	default:
		return refuseSinkRefused
	}
}

// deliver runs one sink's Deliver, records it and keeps the sink's health.
func (p *Publisher) deliver(ctx context.Context, s *directSink, env *sinks.Envelope) int {
	start := time.Now()
	err := sinks.SafeDeliver(ctx, s.sink, env)
	now := time.Now()
	age := now.Sub(time.UnixMilli(env.ReceivedAt))
	if err == nil {
		if at := s.failedAt.Load(); at != 0 && s.failedAt.CompareAndSwap(at, 0) {
			p.log.Info().Str("source_id", s.source).Int("sink", s.index).Str("type", s.typ).Msg("sink confirms publishes again")
		}
		p.tel.DirectPublish(s.typ, telemetry.ResultOK, now.Sub(start), age)
		return publishOK
	}
	res, label := publishRefused, telemetry.ResultError
	dl, hasDL := ctx.Deadline()
	switch {
	case ctx.Err() != nil, hasDL && !now.Before(dl):
		// The second test: a sink whose connection deadline is the context's returns at the deadline, and on a
		// loaded box before the context's own timer has marked it done.
		res, label = publishTimeout, telemetry.ResultTimeout
	case errors.Is(err, sinks.ErrPanicked):
		res = publishPanicked
	}
	p.tel.DirectPublish(s.typ, label, now.Sub(start), age)
	// One warning when a sink starts failing, not one per request: /ready names it meanwhile.
	if prev := s.failedAt.Swap(now.UnixNano()); prev == 0 || now.UnixNano()-prev >= int64(p.window) {
		p.log.Warn().Str("source_id", s.source).Int("sink", s.index).Str("type", s.typ).Err(err).
			Msg("sink publish failed: its hooks are answered 503 until it confirms again")
	} else {
		p.log.Debug().Str("source_id", s.source).Int("sink", s.index).Str("type", s.typ).Err(err).Msg("sink publish failed")
	}
	return res
}
