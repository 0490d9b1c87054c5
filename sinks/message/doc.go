// Package message is Message v1, the JSON document every queue sink (kafka, nats, rabbitmq, redis, sqs,
// google_pubsub) publishes, and the decoder and claim redeemer for the programs that consume it (inventory
// D.4, D.5). It is public API: consumers import it as github.com/ankusa-go/ankusa/sinks/message.
//
// Invariant: for one envelope and one Meta, Encode produces the same bytes whatever the transport, and
// Decode(Encode(e)) gives back every field Encode wrote, with the body byte-exact.
//
// The document, fields always in this order:
//
//	v                1 (bumps only when a field changes meaning or disappears; new fields do not bump it)
//	id               hook id (canonical UUID text)
//	source_id        source id
//	tenant_id        tenant, or null when the hook has none
//	received_at      unix milliseconds
//	content_type     the hook's Content-Type, or null when it had none
//	size             length of the hook body in bytes (inline or claimed)
//	sha256           lowercase hex SHA-256 of the hook body (inline or claimed)
//	dedupe_key       null when the hook has none
//	replay_id        null unless the delivery is a replay
//	idempotency_key  sinks.Envelope.IdempotencyKey: what a consumer deduplicates on
//	headers          object of the forwarded provider headers: names lowercased, in first-seen order, repeats
//	                 joined with ", " into one string; {} when none
//	verification     ok | failed | skipped, or null when not recorded
//	instance         the publishing instance's name, or null
//	body_base64      standard base64 (padded) of the body; absent when claim is present
//	claim            urn:ankusa:claim:v1:<tenant>:<claim_id>; absent when body_base64 is present
//
// Exactly one of body_base64 and claim is present. Consumers ignore keys they do not know. Strings are
// written as UTF-8 JSON; a byte sequence that is not UTF-8 (a dedupe key can be anything a sender chose)
// is written as U+FFFD per invalid byte, as encoding/json does, so such a value is not carried exactly
// (the body always is: it travels as base64 or by claim). Nothing is HTML-escaped; U+2028 and U+2029 are
// escaped so the document is also valid JavaScript.
//
// Attributes is the broker header set that travels beside the document (Kafka record headers, NATS headers,
// AMQP headers, SQS attributes): ankusa_id, ankusa_source_id, ankusa_tenant_id, ankusa_message_version,
// ankusa_idempotency_key, content_type, ankusa_dedupe_key and ankusa_replay_id. An attribute whose value is
// empty is left out. Values pass through sinks.HeaderValue, so a caller-chosen byte that no header can carry
// arrives percent-encoded; the document carries the exact value.
//
// Decode reports every refusal as a *DecodeError whose Code is one of the codes the SDKs share
// (CodeInvalidJSON ... CodeTenantMismatch). Redeem fetches a claimed body from the claim gateway and checks
// it against size and sha256 before returning it.
package message
