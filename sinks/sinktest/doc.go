// Package sinktest is the conformance suite every sink runs (STYLE: "one conformance test suite that every sink
// runs").
//
// Invariant: a sink that passes Run honours the sinks.Sink contract as the caller relies on it — a delivered
// body arrives byte-identical; nil is returned only once the destination has the hook; a refusing or unreachable
// destination yields an error that is not Permanent (unless the target says otherwise); a cancelled context
// returns promptly with an error; concurrent Deliver calls are safe; the body is neither modified nor retained;
// Close is idempotent and a closed sink never claims a delivery; SafeDeliver turns the sink's panic into a
// Transient error. A Target whose sink holds connections (Reconnecting) also proves the sink recovers on its
// own after the connection is cut or the destination is unreachable for a while, through Proxy; a Target that
// states whether its destination keeps hooks (Durability) proves Durable says the same.
//
// Beside the suite it holds what every sink's own tests share, so a sink package writes only what is its own:
// building a sink as an instance does (NewSink), one attempt under a deadline (Deliver), the option-error rule
// (RefusesOptions), reading Message v1 back (ReceivedMessages, Filed, OfHook), the inline_max_bytes rule
// (InlineLimit) and the delivery benchmark (BenchDeliver). It is imported by tests only, and imports no sink.
package sinktest
