package natssink

import "errors"

var (
	// ErrNoStream is a publish no stream answered: no stream is bound to the subject (inventory D.2
	// `no_stream`); Transient.
	ErrNoStream = errors.New("natssink: no_stream")
	// ErrNotConnected is an attempt made while the connection is down or reconnecting; Transient.
	ErrNotConnected = errors.New("natssink: not_connected")
	// ErrInlineTooLarge is a body over inline_max_bytes that came without a claim; Permanent.
	ErrInlineTooLarge = errors.New("natssink: body exceeds inline_max_bytes and has no claim")
)
