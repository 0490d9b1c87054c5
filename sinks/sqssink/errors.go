package sqssink

import "errors"

var (
	// ErrNeedsClaim matches the Permanent error of a body longer than inline_max_bytes that reached Deliver
	// without a claim: the dispatcher checks such bodies in first (sinks.InlineLimiter).
	ErrNeedsClaim = errors.New("sqssink: body over inline_max_bytes without a claim")
	// ErrTooLarge matches the Permanent error of a message (body plus attributes) longer than
	// max_message_bytes: no retry makes it smaller.
	ErrTooLarge = errors.New("sqssink: message over max_message_bytes")
	// ErrChecksum matches the Transient error of a send whose MD5OfMessageBody is not the MD5 of the body
	// sent: what the queue holds is not the message, so the attempt does not count as delivered.
	ErrChecksum = errors.New("sqssink: MD5OfMessageBody does not match the message sent")
)
