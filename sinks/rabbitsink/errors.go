package rabbitsink

import "errors"

// The outcomes of a failed attempt (inventory D.2); all are Transient.
var (
	// ErrUnroutable: the broker returned the message (mandatory): no queue is bound for its routing key.
	ErrUnroutable = errors.New("rabbitsink: unroutable")
	// ErrNacked: the broker refused the message (basic.nack), e.g. a queue over its length limit with
	// reject-publish.
	ErrNacked = errors.New("rabbitsink: nacked")
	// ErrConfirmTimeout: no confirm within confirm_timeout_ms or the attempt's deadline.
	ErrConfirmTimeout = errors.New("rabbitsink: confirm_timeout")
	// ErrBusy: max_inflight attempts are already waiting for confirms.
	ErrBusy = errors.New("rabbitsink: busy")
	// ErrChannelClosed: the channel or connection closed before the confirm (a missing exchange closes the
	// channel with 404).
	ErrChannelClosed = errors.New("rabbitsink: channel_closed")
	// ErrPublishFailed: the publish could not be written.
	ErrPublishFailed = errors.New("rabbitsink: publish_failed")
	// ErrNotConnected: the sink has no open channel; it is reconnecting.
	ErrNotConnected = errors.New("rabbitsink: not_connected")
	// ErrOversize: a body over inline_max_bytes without a claim (Permanent).
	ErrOversize = errors.New("rabbitsink: body too large to carry inline")
)
