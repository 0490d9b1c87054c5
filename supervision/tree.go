package supervision

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Tree is a running root supervisor spawned by Start.
type Tree struct {
	system *actor.ActorSystem
	pid    *actor.PID
	hooks  *treeHooks
}

// Start spawns a supervisor named name at the root of system, spawns children in order (each after the
// previous one reported started) and returns once all started, or the error of the first child that failed to
// start (a *StartError naming it; the children already started are stopped in reverse order first).
func Start(system *actor.ActorSystem, name string, children []ChildSpec, opts Options) (*Tree, error) {
	if err := validate(children); err != nil {
		return nil, fmt.Errorf("cannot start supervisor %q: %w", name, err)
	}
	hooks := &treeHooks{
		booted: make(chan error, 1),
		fatal:  make(chan error, 1),
		done:   make(chan struct{}),
	}
	pid, err := system.Root.SpawnNamed(newProps(children, opts, hooks), name)
	if err != nil {
		return nil, fmt.Errorf("cannot spawn supervisor %q: %w", name, err)
	}
	if err := <-hooks.booted; err != nil {
		// The supervisor stops its children and itself after a failed boot; wait for that (bounded: a child
		// stuck in its Started handler never stops) so the caller usually starts again from nothing.
		timer := time.NewTimer(opts.withDefaults().StartTimeout)
		defer timer.Stop()
		select {
		case <-hooks.done:
		case <-timer.C:
		}
		return nil, fmt.Errorf("cannot start supervisor %q: %w", name, err)
	}
	return &Tree{system: system, pid: pid, hooks: hooks}, nil
}

// PID returns the root supervisor's PID.
func (t *Tree) PID() *actor.PID { return t.pid }

// Stop stops the children in reverse order, each one waited for, then the supervisor itself. It returns
// ErrStopTimeout (wrapped) when that takes longer than timeout; the stop goes on in the background.
func (t *Tree) Stop(timeout time.Duration) error {
	t.system.Root.Send(t.pid, &stopInOrder{})
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-t.hooks.done:
		return nil
	case <-timer.C:
		return fmt.Errorf("cannot stop supervisor %s within %s: %w", t.pid.Id, timeout, ErrStopTimeout)
	}
}

// Fatal receives an error, then is closed, when the tree can no longer keep its children up and the instance
// must stop: the core children exhausted their restart budget (ErrBudgetExhausted; the supervisor has stopped
// all of its children, call Stop to remove the supervisor itself), or the supervisor was stopped by something
// other than Stop (ErrTreeStopped). It never fires after Stop.
func (t *Tree) Fatal() <-chan error { return t.hooks.fatal }

// Done is closed once the supervisor has stopped.
func (t *Tree) Done() <-chan struct{} { return t.hooks.done }
