package routes

import (
	"errors"
	"fmt"
)

// FieldError names the field of a route or IP rule spec that is wrong and why; the caller's value is never
// echoed (the admin API answers 400 with the field, the config loader a problem under its key).
type FieldError struct {
	Field string // dotted, e.g. "path", "ip_rules.rules[2].cidr"
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Msg }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// within prefixes the field of a *FieldError (a nested spec's problem named from its parent).
func within(prefix string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: prefix + "." + fe.Field, Msg: fe.Msg}
	}
	return err
}

// ConflictError refuses a table where two enabled routes share a path shape and a method.
type ConflictError struct {
	A, B   string // the route ids
	Method string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("routes: enabled routes %s and %s share their path and method %s", e.A, e.B, e.Method)
}

// ErrDuplicateID refuses a table holding one id twice.
var ErrDuplicateID = errors.New("routes: duplicate route id")
