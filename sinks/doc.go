// Package sinks is the contract between dispatch (or the edge under wal.type none) and the destinations a hook
// is delivered to.
//
// Invariant: a Sink's nil means the destination confirmed the hook (HTTP 2xx, broker confirm); every other
// outcome is an error that Classify places in exactly one class — Permanent (dead-letter now, not counted by
// breakers), RetryAfterClass (next attempt no earlier than the given delay, capped at one hour) or Transient
// (retry with back-off). A sink that panics is a Transient failure of one attempt (SafeDeliver), never a crash of
// its caller.
//
// The pieces:
//
//  1. Envelope is the hook as a sink sees it; it is read-only and its Body is never retained past Deliver.
//  2. Envelope.IdempotencyKey and ForwardedHeaders compute, in one place, the key and the provider headers
//     every sink sends (inventory D.4).
//  3. Registry builds sinks from config entries; it is an instance-scoped value, never a package global, so two
//     instances in one process can carry different sink sets. Option problems are *OptionError values that name
//     the sink type and option, never the option's value (options hold secrets).
//
// A sink owns its connections: connecting, reconnecting with back-off and reporting "not connected" as a
// Transient error happen inside the sink. Sinks never import the store or dispatch.
package sinks
