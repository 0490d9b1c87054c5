package pubsubsink

import "errors"

var (
	// ErrNeedsClaim matches the Permanent error of a body longer than inline_max_bytes that reached Deliver
	// without a claim: the dispatcher checks such bodies in first (sinks.InlineLimiter).
	ErrNeedsClaim = errors.New("pubsubsink: body over inline_max_bytes without a claim")
	// ErrTooLarge matches the Permanent error of a message (data, attributes and ordering key) longer than
	// max_message_bytes: no retry makes it smaller.
	ErrTooLarge = errors.New("pubsubsink: message over max_message_bytes")
	// ErrNotConnected matches the Transient error of an attempt made while the client cannot be built (no
	// credentials yet, say); the sink tries again after a back-off.
	ErrNotConnected = errors.New("pubsubsink: not connected")
)
