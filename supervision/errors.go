package supervision

import (
	"errors"
	"fmt"
)

var (
	// ErrBudgetExhausted is wrapped by the error a supervisor escalates with (and Tree.Fatal delivers) when
	// its core children crashed more than MaxRestarts times within Window.
	ErrBudgetExhausted = errors.New("supervision: restart budget exhausted")
	// ErrStopTimeout is returned by Tree.Stop when the tree is not gone within the timeout.
	ErrStopTimeout = errors.New("supervision: stop timed out")
	// ErrStopped is returned by Start when the tree was stopped before it finished booting.
	ErrStopped = errors.New("supervision: stopped while starting")
	// ErrTreeStopped is what Tree.Fatal delivers when the root supervisor was stopped by anything but
	// Tree.Stop (a system Stop): its children are gone.
	ErrTreeStopped = errors.New("supervision: supervisor stopped without Tree.Stop")
	// ErrInvalidSpec reports a child list that cannot be supervised (an empty or duplicate name, nil props).
	ErrInvalidSpec = errors.New("supervision: invalid child spec")
)

// StartError reports a child that failed to start at boot: it panicked while handling *actor.Started, or did
// not report started within Options.StartTimeout. Child is the path below the supervisor that failed, e.g.
// "edge/writer" for a child of the nested supervisor "edge".
type StartError struct {
	Child  string
	Reason string // the panic value or error text
	Err    error  // the panic value when it was an error, for errors.Is/As
}

func (e *StartError) Error() string {
	return fmt.Sprintf("supervision: child %q failed to start: %s", e.Child, e.Reason)
}

// Unwrap returns the panic value when it was an error.
func (e *StartError) Unwrap() error { return e.Err }
