// Package natssink publishes hooks to NATS JetStream (sink type "nats", inventory D.2).
//
// Invariant: Deliver returns nil only when a JetStream stream acknowledged the hook's Message v1 (package
// sinks/message) without an error: the broker stored it (or already had it: a duplicate ack for the same
// Nats-Msg-Id). A subject no stream listens on is ErrNoStream (`no_stream`), Transient: the operator creates
// the stream, the sink never does. A message over the server's max_payload, or a body over inline_max_bytes
// without a claim, is Permanent: no retry makes it smaller. Everything else (not connected, timeout, an ack
// carrying an error) is Transient.
//
// Each message carries the broker header set of message.Attributes plus Nats-Msg-Id = the hook id, or
// "<id>:replay:<replay_id>" for a replay, so JetStream's duplicate window drops a retried publish the
// stream already holds while a replay is stored again.
//
// The connection is opened by the first attempt, not by New (instance.Check builds every sink to validate
// it). nats.go owns reconnecting: after a cut it redials with a back-off from 50 ms doubling to 2 s, forever,
// trying the configured servers in random order. While it is not connected an attempt fails at once
// (ErrNotConnected) instead of queueing in a reconnect buffer, so nil never waits on a publish that may
// never be sent.
package natssink
