package load

import "errors"

var (
	// ErrNoURL is returned by Run when Options.URL is empty.
	ErrNoURL = errors.New("load: no url")
	// ErrBadURL is returned by Run when Options.URL is not an absolute http(s) URL.
	ErrBadURL = errors.New("load: url must be absolute http or https")
	// ErrUnbounded is returned by Run when neither Requests nor Duration is set.
	ErrUnbounded = errors.New("load: one of requests or duration must be set")
	// ErrBadOptions is returned by Run when a count, rate or duration is negative.
	ErrBadOptions = errors.New("load: negative workers, rate, requests, duration, body bytes or timeout")
)
