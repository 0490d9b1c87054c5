package sinks

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrUnknownType is returned by Registry.New for a sink type nobody registered.
	ErrUnknownType = errors.New("sinks: unknown sink type")
	// ErrInvalidOption matches every *OptionError: a sink entry's options were refused.
	ErrInvalidOption = errors.New("sinks: invalid option")
	// ErrPanicked matches the error SafeDeliver returns for a sink that panicked; it is always Transient.
	ErrPanicked = errors.New("sinks: sink panicked")
	// ErrClosed is returned by Deliver on a closed sink; Transient, since a rebuilt sink may deliver.
	ErrClosed = errors.New("sinks: sink closed")
)

// MaxRetryAfter caps the delay a destination may ask for (inventory D.1: "next attempt ≥ ms (cap 1 h)").
const MaxRetryAfter = time.Hour

// Class is what the caller does with a failed attempt.
type Class uint8

const (
	// Transient: retry with the source's back-off (counted by the breaker).
	Transient Class = iota
	// PermanentClass: dead-letter now, not counted by the breaker. (Named with a suffix because Permanent is
	// the constructor.)
	PermanentClass
	// RetryAfterClass: the next attempt is due no earlier than the returned delay, or the back-off, whichever
	// is later.
	RetryAfterClass
)

func (c Class) String() string {
	switch c {
	case Transient:
		return "transient"
	case PermanentClass:
		return "permanent"
	case RetryAfterClass:
		return "retry_after"
	default:
		return fmt.Sprintf("class(%d)", uint8(c))
	}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string {
	if e.err == nil {
		return "sinks: permanent failure"
	}
	return e.err.Error()
}
func (e *permanentError) Unwrap() error { return e.err }

type retryAfterError struct {
	d   time.Duration
	err error
}

func (e *retryAfterError) Error() string {
	msg := "sinks: destination asked to retry later"
	if e.err != nil {
		msg = e.err.Error()
	}
	return fmt.Sprintf("%s (retry after %s)", msg, e.d)
}
func (e *retryAfterError) Unwrap() error { return e.err }

// Permanent marks err as a failure no retry can fix: the hook is dead-lettered now. Permanent(nil) is still a
// failure, never nil, so a sink cannot turn a refusal into a confirmation by accident.
func Permanent(err error) error { return &permanentError{err: err} }

// RetryAfter marks err as a failure whose next attempt must wait at least d (clamped to 0..MaxRetryAfter).
// RetryAfter(d, nil) is still a failure, never nil.
func RetryAfter(d time.Duration, err error) error {
	if d < 0 {
		d = 0
	}
	if d > MaxRetryAfter {
		d = MaxRetryAfter
	}
	return &retryAfterError{d: d, err: err}
}

// Classify is the one place that decides retryability. An error marked both ways is Permanent: waiting cannot
// fix a refused hook. nil and unmarked errors (including context errors and panics) are Transient.
func Classify(err error) (Class, time.Duration) {
	if err == nil {
		return Transient, 0
	}
	var p *permanentError
	if errors.As(err, &p) {
		return PermanentClass, 0
	}
	var r *retryAfterError
	if errors.As(err, &r) {
		return RetryAfterClass, r.d
	}
	return Transient, 0
}

// OptionError says which option of a sink entry is wrong. It never holds the option's value: options carry
// secrets.
type OptionError struct {
	Sink   string // sink type ("http")
	Option string // option path ("url", "secret[1]", "headers.x-token")
	Msg    string // what is wrong ("must be an absolute http(s) URL")
}

func (e *OptionError) Error() string { return e.Sink + " sink: " + e.Option + ": " + e.Msg }

// Is makes every *OptionError match ErrInvalidOption.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOption }

// panicError carries a recovered panic. It deliberately has no Unwrap: a panic value that happens to be a
// Permanent error must not make the attempt permanent.
type panicError struct{ val any }

func (e *panicError) Error() string        { return fmt.Sprintf("sinks: sink panicked: %v", e.val) }
func (e *panicError) Is(target error) bool { return target == ErrPanicked }
