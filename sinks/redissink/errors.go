package redissink

import "errors"

var (
	// ErrNoSubscribers is a PUBLISH that reached nobody (inventory D.2 `no_subscribers`); Transient.
	ErrNoSubscribers = errors.New("redissink: no_subscribers")
	// ErrInlineTooLarge is a body over inline_max_bytes that came without a claim; Permanent.
	ErrInlineTooLarge = errors.New("redissink: body exceeds inline_max_bytes and has no claim")
)
