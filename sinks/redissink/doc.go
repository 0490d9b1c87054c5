// Package redissink publishes hooks on a Redis pub/sub channel (sink type "redis", inventory D.2).
//
// Invariant: Deliver returns nil only when PUBLISH of the hook's Message v1 (package sinks/message) reached at
// least one subscriber. Zero subscribers is ErrNoSubscribers, a Transient error: nobody received the hook. The
// sink is never durable (Durable false): a subscriber that was not listening, or lost its connection after
// the PUBLISH, never sees the hook, and Redis keeps nothing.
//
// A body longer than inline_max_bytes travels as a claim (sinks.Envelope.Claim); without a claim such a hook
// is refused as Permanent (ErrInlineTooLarge), since no retry makes the body smaller. Redis pub/sub has no
// headers: the message document carries everything.
//
// Connections are go-redis's pool: a connection that failed is discarded and the next attempt dials a new
// one, so the sink recovers from a restart or a network cut on its own; every attempt is bounded by
// publish_timeout_ms and by the caller's context.
package redissink
