// Package kafkasink publishes hooks to a Kafka topic (sink type "kafka", inventory D.2 and D.4).
//
// Invariant: Deliver returns nil only once every in-sync replica of the record's partition acknowledged it
// (acks=all). The record's value is the hook as Message v1 (package sinks/message), its headers the broker
// header set (message.Attributes), its key `{tenant}/{source_id}` unless configured.
//
// What the sink never does, and why:
//
//  1. It never creates a topic: the client does not ask for auto-creation, so a missing topic is an error of
//     the attempt (Transient: the operator creates the topic, the retry delivers), never a silently created
//     topic with default settings.
//  2. It never lets one attempt's context fail another's record. franz-go cancels a whole partition batch
//     when the context of the batch's first record ends, so records are produced under the sink's own context
//     and Deliver stops waiting (with an error) when its attempt's context ends. A record Deliver gave up on
//     may still land: at-least-once, as every retry is.
//  3. It never blocks past the attempt's deadline nor past produce_timeout_ms, even with the whole cluster gone
//     (franz-go's produce can wait for a cluster to come back): Deliver waits for the record's promise, the
//     context or the produce timeout, whichever comes first, and the record carries the same delivery timeout
//     so the client drops it too.
//
// Refusals no retry can fix are Permanent: a record over max_record_bytes (checked before producing), a body
// over inline_max_bytes without a claim, and the broker's MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
// CORRUPT_MESSAGE (INVALID_MESSAGE) and INVALID_RECORD. Everything else — NOT_ENOUGH_REPLICAS, an unknown
// topic, a broker that cannot be reached, a timeout — is Transient.
//
// Concurrent Deliver calls share produce requests: each attempt hands its record to the one client with a
// promise instead of producing synchronously, and the client batches whatever is buffered while a request is
// in flight.
package kafkasink
