package intake

import "errors"

// Errors of the intake log.
var (
	// ErrClosed: the log was closed; the publish was not confirmed.
	ErrClosed = errors.New("intake: log closed")
	// ErrTimeout: the confirm did not come within intake.publish_timeout_ms.
	ErrTimeout = errors.New("intake: publish not confirmed in time")
	// ErrCorruptRecord: a log record this version cannot decode.
	ErrCorruptRecord = errors.New("intake: corrupt record")
)
