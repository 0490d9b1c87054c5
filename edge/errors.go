package edge

import (
	"encoding/json"
	"errors"
	"strconv"
)

// Sentinel errors of the edge.
var (
	// ErrUnknownSource: the URL names no source this node serves (404 unknown_source).
	ErrUnknownSource = errors.New("edge: unknown source")
	// ErrSourcesUnavailable: the source store cannot answer; never reported as unknown (503).
	ErrSourcesUnavailable = errors.New("edge: source store unavailable")
	// ErrBatcherStopped answers a record its batcher dropped when it stopped or crashed.
	ErrBatcherStopped = errors.New("edge: batcher stopped before the record was committed")
)

// RefusedError is a request the edge refuses, with the status, machine-readable reason
// and Retry-After (seconds, 0 = none) the design names for it.
type RefusedError struct {
	Status     int
	Reason     string
	RetryAfter int
	// Detail adds the one field some reasons carry: header name, size limit, read error.
	Detail refusalDetail
}

type refusalDetail struct {
	key   string
	value string // already JSON-encoded
}

func (e *RefusedError) Error() string {
	return "edge: refused " + strconv.Itoa(e.Status) + " " + e.Reason
}

var (
	refuseNotFound      = &RefusedError{Status: 404, Reason: "not_found"}
	refuseUnknownSource = &RefusedError{Status: 404, Reason: "unknown_source"}
	refuseSourceStore   = &RefusedError{Status: 503, Reason: "store_unavailable", RetryAfter: 1}
	refuseOverload      = &RefusedError{Status: 503, Reason: "overload", RetryAfter: 1}
	refuseStore         = &RefusedError{Status: 503, Reason: "store_unavailable", RetryAfter: 1}
	refuseDeadline      = &RefusedError{Status: 503, Reason: "deadline_exceeded", RetryAfter: 1}
	refuseBadRequest    = &RefusedError{Status: 400, Reason: "bad_request"}
)

func refuseTooLarge(limit int64) *RefusedError {
	return &RefusedError{Status: 413, Reason: "payload_too_large", Detail: refusalDetail{"limit", strconv.FormatInt(limit, 10)}}
}

func refuseInvalidHeader(name []byte, nameOK bool) *RefusedError {
	v := "null"
	if nameOK {
		v = jsonString(string(name))
	}
	return &RefusedError{Status: 400, Reason: "invalid_header", Detail: refusalDetail{"header", v}}
}

func refuseBodyRead(err error) *RefusedError {
	return &RefusedError{Status: 400, Reason: "body_read_failed", Detail: refusalDetail{"reason", jsonString(err.Error())}}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}
