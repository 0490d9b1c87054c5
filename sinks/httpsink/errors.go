package httpsink

import (
	"errors"
	"net/http"
	"strconv"
)

var (
	// ErrRedirect matches the *StatusError of a 3xx answer: redirects are never followed (Transient).
	ErrRedirect    = errors.New("httpsink: redirect not followed")
	errEmptySecret = errors.New("httpsink: empty secret")
	// errUnbuildable is a request no retry can send (always Permanent).
	errUnbuildable = errors.New("httpsink: request cannot be built")
)

// StatusError is a non-2xx answer. Its class (Permanent, RetryAfter or Transient) is carried by the wrapping
// error Deliver returns; errors.As finds the StatusError under it.
type StatusError struct {
	Code int    // HTTP status code
	Body string // the first bytes of the response body, for the dead-letter reason
}

func (e *StatusError) Error() string {
	msg := "httpsink: destination answered " + strconv.Itoa(e.Code) + " " + http.StatusText(e.Code)
	if e.Code >= 300 && e.Code < 400 {
		msg = "httpsink: redirect not followed (" + strconv.Itoa(e.Code) + " " + http.StatusText(e.Code) + ")"
	}
	if e.Body != "" {
		msg += ": " + strconv.Quote(e.Body)
	}
	return msg
}

// Unwrap makes a 3xx match ErrRedirect.
func (e *StatusError) Unwrap() error {
	if e.Code >= 300 && e.Code < 400 {
		return ErrRedirect
	}
	return nil
}
