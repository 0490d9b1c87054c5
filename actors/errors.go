package actors

import "errors"

// ErrKilled is the panic value (wrapped in a *KilledError) of an actor crashed on purpose by a Kill.
var ErrKilled = errors.New("actors: killed by chaos injection")

// KilledError is what an actor armed through Kill.Arm panics with; errors.Is(err, ErrKilled) holds.
type KilledError struct {
	Actor string // the PID id of the crashed actor
}

func (e *KilledError) Error() string { return ErrKilled.Error() + ": " + e.Actor }

// Unwrap lets errors.Is match ErrKilled.
func (e *KilledError) Unwrap() error { return ErrKilled }
