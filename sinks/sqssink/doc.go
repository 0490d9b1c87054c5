// Package sqssink delivers hooks to an Amazon SQS queue (sink type "sqs", inventory D.2).
//
// Invariant: Deliver returns nil only when SendMessage answered 200 with an MD5OfMessageBody equal to the
// MD5 of the Message v1 document it sent (package message); a mismatch is a Transient error, since the
// queue holds something other than the hook.
//
// The message: the body is message.Encode of the envelope (the body inline as base64, or the claim ref when
// the dispatcher checked the body in); the message attributes are message.Attributes, each a String
// attribute. On a FIFO queue (queue_url ending in .fifo) MessageDeduplicationId is the hook id, or
// "<id>:replay:<replay_id>" for a replay, so a retry of one hook within SQS's five-minute window is stored
// once, and MessageGroupId is message_group_id or "<tenant>/<source>". An id SQS cannot carry (over 128
// characters, or outside !-~) is replaced by the hex SHA-256 of it, which is as stable across retries.
//
// Classes: a body over inline_max_bytes without a claim, a message (body plus attribute names, types and
// values, as SQS counts it) over max_message_bytes, and the service's InvalidMessageContents and
// InvalidParameterValue are Permanent; throttling and 5xx answers are RetryAfter when the answer carries
// Retry-After, else Transient, as is everything else, a missing queue included (the sink never creates one:
// the operator does, and the hook waits in the retry schedule meanwhile).
//
// A send whose answer is lost after SQS stored the message (a connection closed while the response is read,
// which aws-sdk-go-v2 reports as "use of closed network connection") is Transient like any other: the retry
// may store the hook twice, which consumers drop by ankusa_idempotency_key (FIFO queues by the dedupe id).
//
// The SDK's own retries are off: one Deliver is one SendMessage, and the retry schedule, back-off and
// breaker stay in dispatch where they are counted. Credentials are the credentials option or the SDK's
// default chain; neither is ever logged or put in an error.
package sqssink
