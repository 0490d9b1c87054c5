package sinks

import "context"

// Sink delivers hooks to one destination. Implementations are safe for concurrent use: a lane may run several
// attempts at once.
type Sink interface {
	// Deliver returns nil only when the destination confirmed the hook (HTTP 2xx, broker confirm, ...). ctx
	// carries the attempt deadline; a cancelled ctx makes Deliver return promptly with an error. Errors are
	// classified by Classify; a sink that is not connected returns a Transient error and reconnects with
	// back-off on its own.
	Deliver(ctx context.Context, e *Envelope) error
	// Durable reports whether nil means the destination kept the hook (the log sink: false). wal.type none
	// needs at least one durable sink per source (inventory D.6).
	Durable() bool
	// Close releases the sink's connections. It is idempotent; Deliver after Close returns an error.
	Close() error
}

// InlineLimiter is implemented by a sink that carries the body inside a message of bounded size (the queue
// sinks, inventory D.1 `inline_max_bytes`). A body longer than InlineMaxBytes must reach Deliver checked in,
// with Envelope.Claim set; without a claim such a sink refuses the hook with a Permanent error, since no
// retry makes the body smaller.
type InlineLimiter interface {
	InlineMaxBytes() int
}

// Answerer is implemented by a sink whose destination answers each hook with a status code (HTTP):
// DeliverAnswered is Deliver that also returns the code the destination answered, 0 when none was read (the
// connection failed first). Dispatch records the code with the attempt, a 2xx as much as a refusal.
type Answerer interface {
	DeliverAnswered(ctx context.Context, e *Envelope) (status int, err error)
}

// ClaimCheckIn checks e's body in with the claim check (inventory D.5) and returns its claim ref. The same hook
// must get the same ref each time (its pack id follows from the hook), so a check-in repeated after a crash
// overwrites its pack instead of adding another.
type ClaimCheckIn func(ctx context.Context, e *Envelope) (ref string, err error)

// ClaimThreshold is the smallest InlineMaxBytes among ss, the sinks of one source: a body longer than it is
// checked in once and every sink of the source that is an InlineLimiter carries the claim (inventory D.5). ok is
// false when no sink of ss is an InlineLimiter (HTTP sinks never claim).
func ClaimThreshold(ss []Sink) (limit int, ok bool) {
	for _, s := range ss {
		if l, is := s.(InlineLimiter); is && (!ok || l.InlineMaxBytes() < limit) {
			limit, ok = l.InlineMaxBytes(), true
		}
	}
	return limit, ok
}

// SafeDeliverAnswered is SafeDeliver through s.DeliverAnswered when s is an Answerer; else the status is 0.
func SafeDeliverAnswered(ctx context.Context, s Sink, e *Envelope) (status int, err error) {
	a, ok := s.(Answerer)
	if !ok {
		return 0, SafeDeliver(ctx, s, e)
	}
	defer func() {
		if r := recover(); r != nil {
			status, err = 0, &panicError{val: r}
		}
	}()
	return a.DeliverAnswered(ctx, e)
}

// SafeDeliver calls s.Deliver and turns a panic inside the sink into a Transient error matching ErrPanicked, so
// a raising sink costs one attempt, never its caller (inventory D.1: "Raise/throw/exit/other return ⇒ error on
// every path").
func SafeDeliver(ctx context.Context, s Sink, e *Envelope) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{val: r}
		}
	}()
	return s.Deliver(ctx, e)
}
