package kafkasink

import "errors"

var (
	// ErrOversize matches the Permanent error of a record larger than max_record_bytes, or of a body larger than
	// inline_max_bytes that reached the sink without a claim.
	ErrOversize = errors.New("kafkasink: record too large")
	// ErrBusy matches the Transient error of an attempt refused because the client already buffers as many
	// records as it may.
	ErrBusy = errors.New("kafkasink: busy")
	// ErrNoAck matches the Transient error of an attempt whose context ended before the acknowledgement.
	ErrNoAck = errors.New("kafkasink: no acknowledgement")
)
