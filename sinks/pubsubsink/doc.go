// Package pubsubsink delivers hooks to a Google Cloud Pub/Sub topic (sink type "google_pubsub", inventory
// D.2).
//
// Invariant: Deliver returns nil only when the service accepted the publish and gave the message its id
// (PublishResult.Get without error). The sink never creates the topic: a missing one fails the attempt with
// a Transient error (NotFound), and the hook waits in the retry schedule until the operator creates it. A
// topic without a subscription accepts and drops the message, which is Pub/Sub's contract, not the sink's.
//
// The message: Data is message.Encode of the envelope (the body inline as base64, or the claim ref when the
// dispatcher checked the body in); Attributes are message.Attributes; OrderingKey is ordering_key when set
// (the publisher then runs with message ordering, and a failed publish resumes its key so the next attempt
// is not refused for the earlier failure).
//
// One publisher per sink: concurrent Deliver calls are batched into one Publish request by the client
// (delay threshold 1 ms), and each waits for its own result. The client is built on the first Deliver,
// not by New, because building it resolves credentials (auth metadata may have none on a machine that only
// checks the config); a failure to build is ErrNotConnected (Transient), retried after a back-off of 1 s
// doubling to 30 s.
//
// Classes: a body over inline_max_bytes without a claim, a message over max_message_bytes and the service's
// InvalidArgument are Permanent; ResourceExhausted and Unavailable carrying a RetryInfo delay are RetryAfter;
// everything else (NotFound, PermissionDenied, Unauthenticated, Unavailable, deadline) is Transient.
//
// auth: metadata uses Application Default Credentials; token sends a static access token (never logged or
// put in an error); none connects without credentials and without TLS, for the emulator and tests, and
// needs endpoint.
package pubsubsink
