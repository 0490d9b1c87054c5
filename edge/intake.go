package edge

import (
	"errors"

	"github.com/ankusa-go/ankusa/store"
)

// IntakeState is what the edge asks the intake log of wal.type dual (intake.Dual implements it).
type IntakeState interface {
	// Recovering is true while boot recovery replays the log: nothing is served.
	Recovering() bool
	// Ready is false while the breaker is open or recovery runs (/ready reason intake).
	Ready() bool
	// PendingID reports whether a hook is held unconfirmed: a retry of it is 503 intake_pending.
	PendingID(id [16]byte) bool
}

// SetIntake makes the edge and /ready follow the intake log (wal.type dual); retryAfter is
// intake.retry_after_s. It is called before the listener starts.
func (e *Edge) SetIntake(in IntakeState, retryAfter int) {
	e.intake = in
	e.intakeRetryAfter = retryAfter
	e.health.intake.Store(&in)
}

var refuseRecovering = &RefusedError{Status: 503, Reason: "recovering", RetryAfter: 1}

// intakeRefusal maps the intake errors to their answers; other errors pass through.
func (e *Edge) intakeRefusal(err error) error {
	switch {
	case errors.Is(err, store.ErrIntakeUnavailable):
		return &RefusedError{Status: 503, Reason: "intake_unavailable", RetryAfter: e.intakeRetryAfter}
	case errors.Is(err, store.ErrIntakePending):
		return &RefusedError{Status: 503, Reason: "intake_pending", RetryAfter: e.intakeRetryAfter}
	case errors.Is(err, store.ErrRecovering):
		return refuseRecovering
	}
	return err
}

// intakeNotReady is the intake check of /ready: "" when ready (or not dual), else its reason.
func (h *Health) intakeNotReady() string {
	p := h.intake.Load()
	if p == nil {
		return ""
	}
	switch in := *p; {
	case in.Recovering():
		return "recovering"
	case !in.Ready():
		return "intake_down"
	}
	return ""
}
