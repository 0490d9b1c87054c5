// Package rabbitsink publishes hooks to a RabbitMQ exchange (sink type "rabbitmq", inventory D.2 and D.4).
//
// Invariant: Deliver returns nil only when the broker confirmed the publish (publisher confirms) and did not
// return it as unroutable: the message, persistent and mandatory, reached at least one queue. Every other
// outcome is a Transient error naming what happened — unroutable, nacked, confirm_timeout, busy,
// channel_closed, publish_failed, not_connected — since each one is cured by waiting (a queue is bound, the
// broker recovers, the connection comes back). Only a body over inline_max_bytes without a claim, or a routing
// key AMQP cannot carry, is Permanent.
//
// The message: body = Message v1 (package sinks/message), content_type application/json, delivery mode
// persistent, message_id = hook id, timestamp = received_at, AMQP headers = the broker header set
// (message.Attributes), routing key = routing_key (`ankusa.{source_id}` by default).
//
// Unroutable messages. With mandatory set, RabbitMQ answers a message no queue takes with basic.return and
// then still acks it (the confirm only says the broker handled it). The broker sends the return before the
// ack on the same channel, and the client library hands a return to its listener synchronously before it
// reads the next frame. So each session runs one goroutine that receives returns from an unbuffered channel
// and records them for the publishes waiting on them; a Deliver that saw its ack first synchronises with that
// goroutine (a send it can only take once it finished with every return received before), then looks its
// message id up. A return therefore can never be overtaken by its own ack.
//
// Connections. The sink never declares exchanges, queues or bindings: they are the operator's. It connects
// on the first Deliver (building a sink, as check-config does, never dials), keeps one connection with one
// confirm-mode channel, and reconnects on its own after a close: the channel alone when only the channel
// closed (a publish to a missing exchange closes it), the connection otherwise, with a back-off from 100 ms
// doubling up to retry_ms, ±20 % jitter. While it is not connected, Deliver fails at once with
// not_connected, except that the first attempts wait for the first connection. max_inflight bounds the
// attempts waiting for confirms; past it Deliver answers busy without publishing. While the broker blocks
// publishers (connection.blocked, a resource alarm) Deliver answers publish_failed without publishing: a
// write to a blocked connection may not return before the attempt's deadline.
package rabbitsink
