package supervision

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// childState is where one child is in its life as the supervisor sees it.
type childState uint8

const (
	stateIdle     childState = iota // no live incarnation
	stateStarting                   // spawned, its "started" report not in yet
	stateRunning                    // reported started
	stateStopping                   // stop sent, its Terminated not in yet
)

// child is the supervisor's record of one ChildSpec.
type child struct {
	spec  ChildSpec
	idx   int
	id    string // PID id: "<supervisor id>/<name>"
	pid   *actor.PID
	state childState
	gen   uint64 // bumped on every spawn; matches childStarted and startTimedOut to their spawn

	failed     bool // a Failure arrived from the current incarnation (its mailbox is suspended)
	nested     bool // the current incarnation is a supervisor: stop it with stopInOrder while it can read it
	startTimer *time.Timer

	crashed    bool   // the next "started" report ends a restart after a crash
	lastReason string // why it last crashed

	// Isolated children only.
	restarts     []time.Time // crashes within Window, its own budget
	down         bool        // past its budget, waiting for its back-off
	wasDown      bool        // went down: its next "started" report is a subtree_up
	attempt      int         // back-off exponent
	upSince      time.Time   // last "started" report
	downToken    uint64
	backoffTimer *time.Timer
}

// mode is what the supervisor as a whole is doing.
type mode uint8

const (
	modeRun      mode = iota // keep every child up
	modeStop                 // stop all children in reverse order, then itself (Tree.Stop, or a parent's stopInOrder)
	modeEscalate             // stop all children in reverse order, then escalate (budget exhausted, boot failed)
)

// treeHooks connect the root supervisor spawned by Start to its Tree. Nil for a nested supervisor.
type treeHooks struct {
	booted chan error    // receives once: nil when every child started, or the boot error
	fatal  chan error    // receives the escalation error, then is closed
	done   chan struct{} // closed when the supervisor has stopped
	once   struct{ booted, fatal, done bool }
}

// supervisor is the rest-for-one supervisor actor. All its fields are touched only on its own goroutine:
// Receive and HandleFailure both run there.
type supervisor struct {
	opts     Options
	specErr  error
	children []*child
	byName   map[string]*child
	byID     map[string]*child

	ctx           actor.Context
	hooks         *treeHooks
	reportStarted func() // set by the parent's startReporter when nested; called once the subtree is up

	mode          mode
	booting       bool
	stopRequested bool // a stopInOrder arrived (Tree.Stop, or the parent supervisor)
	finished      bool
	cut           int         // rest-for-one in progress: children from cut on are being stopped; -1 if none
	restarts      []time.Time // core crashes within Window
	escalation    error       // why the supervisor escalates (modeEscalate)
}

var _ actor.SupervisorStrategy = (*supervisor)(nil)

// NewProps returns the props of a rest-for-one supervisor of children. Used as a ChildSpec's Props it nests:
// the nested supervisor reports started once all its own children did, and escalates to its parent when its
// core budget is exhausted or one of its children fails to start at boot.
func NewProps(children []ChildSpec, opts Options) *actor.Props {
	return newProps(children, opts, nil)
}

func newProps(children []ChildSpec, opts Options, hooks *treeHooks) *actor.Props {
	specs := append([]ChildSpec(nil), children...)
	opts = opts.withDefaults()
	specErr := validate(specs)
	return actor.PropsFromProducer(func() actor.Actor {
		return newSupervisor(specs, opts, hooks, specErr)
	})
}

func validate(specs []ChildSpec) error {
	seen := make(map[string]bool, len(specs))
	for i, s := range specs {
		switch {
		case s.Name == "":
			return fmt.Errorf("child %d has no name: %w", i, ErrInvalidSpec)
		case seen[s.Name]:
			return fmt.Errorf("child name %q used twice: %w", s.Name, ErrInvalidSpec)
		case s.Props == nil:
			return fmt.Errorf("child %q has no props: %w", s.Name, ErrInvalidSpec)
		}
		seen[s.Name] = true
	}
	return nil
}

func newSupervisor(specs []ChildSpec, opts Options, hooks *treeHooks, specErr error) *supervisor {
	s := &supervisor{
		opts:     opts,
		specErr:  specErr,
		children: make([]*child, len(specs)),
		byName:   make(map[string]*child, len(specs)),
		byID:     make(map[string]*child, len(specs)),
		hooks:    hooks,
		cut:      -1,
	}
	for i, spec := range specs {
		c := &child{spec: spec, idx: i}
		s.children[i] = c
		s.byName[spec.Name] = c
	}
	return s
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.ctx = ctx
		s.booting = true
		for _, c := range s.children {
			c.id = ctx.Self().Id + "/" + c.spec.Name
			s.byID[c.id] = c
		}
		if s.specErr != nil {
			// Child stays empty: the parent names this supervisor itself as the child that failed to start.
			s.escalate(&StartError{Reason: s.specErr.Error(), Err: s.specErr})
		}
		s.reconcile()

	case *childStarted:
		c := s.byName[m.name]
		if c == nil || c.state != stateStarting || c.gen != m.gen || c.failed {
			// Stale: that incarnation was stopped, or its failure notice overtook this report.
			return
		}
		c.nested = m.nested
		s.started(c)
		s.reconcile()

	case *actor.Terminated:
		c := s.byID[m.Who.Id]
		if c == nil || c.state == stateIdle {
			return
		}
		s.terminated(c)
		s.reconcile()

	case *startTimedOut:
		c := s.byName[m.name]
		if c == nil || c.state != stateStarting || c.gen != m.gen {
			return
		}
		s.failure(c, fmt.Sprintf("did not report started within %s", s.opts.StartTimeout), true)
		s.reconcile()

	case *backoffElapsed:
		c := s.byName[m.name]
		if c == nil || !c.down || c.downToken != m.token {
			return
		}
		c.down = false
		c.backoffTimer = nil
		s.reconcile()

	case *stopInOrder:
		s.stopRequested = true
		if s.finished {
			// A root that escalated has no children left and waits for this; anything else is already
			// stopping itself, and a second Stop is harmless.
			ctx.Stop(ctx.Self())
			return
		}
		if s.mode != modeStop {
			s.mode = modeStop
			s.cancelBackoffs()
			s.reconcile()
		}

	case *actor.Stopping, *actor.Restarting:
		// protoactor stops every child next (all at once when the stop did not come through stopInOrder).
		// Their terminations are the end of this incarnation, not crashes to repair: never spawn again.
		s.mode = modeStop
		s.finished = true
		if _, stopping := m.(*actor.Stopping); stopping && s.hooks != nil {
			s.hooks.bootDone(ErrStopped) // no-op unless stopped from outside while booting
		}
		s.cancelBackoffs()
		for _, c := range s.children {
			stopTimer(&c.startTimer)
		}

	case *actor.Stopped:
		if s.hooks != nil {
			if !s.stopRequested {
				// Stopped by something other than Tree.Stop (a system Stop): the instance has lost its tree.
				s.hooks.fail(ErrTreeStopped)
			}
			s.hooks.stopped()
		}
	}
}

// HandleFailure is protoactor's notice that a child panicked; it runs on the supervisor's goroutine.
func (s *supervisor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, who *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	c := s.byID[who.Id]
	if c == nil || c.pid == nil {
		sup.StopChildren(who) // not one of ours (cannot happen): never leave it suspended
		return
	}
	c.failed = true
	if c.state == stateStopping {
		// Already on its way out. A nested supervisor asked with stopInOrder may have escalated instead and
		// now sits suspended: the system Stop reaches it anyway, and a second one is harmless.
		s.ctx.Stop(c.pid)
		return
	}
	sp, isStart := reason.(*startPanic)
	if isStart {
		reason = sp.reason
	}
	s.failure(c, reason, isStart)
	s.reconcile()
}

// failure applies the restart policy to a crash of c's live incarnation.
func (s *supervisor) failure(c *child, reason any, isStart bool) {
	text := reasonText(reason)
	if s.mode != modeRun || (s.cut >= 0 && c.idx >= s.cut) {
		return // everything from here on is being stopped already; reconcile reaches c in turn
	}
	if isStart && s.booting {
		s.escalate(startError(c.spec.Name, reason))
		return
	}
	now := time.Now()
	if c.spec.Isolated {
		c.restarts = recent(c.restarts, now, s.opts.Window)
		if len(c.restarts) > s.opts.MaxRestarts {
			if !c.upSince.IsZero() && now.Sub(c.upSince) >= s.opts.BackoffReset {
				c.attempt = 0
			}
			d := backoff(c.attempt, s.opts.BackoffMin, s.opts.BackoffMax, s.opts.Rand())
			c.attempt++
			c.down, c.wasDown, c.crashed, c.restarts = true, true, false, nil
			c.downToken++
			s.emit(Event{Kind: EventSubtreeDown, Domain: c.spec.Domain, Child: c.spec.Name, Reason: text, Delay: d})
			c.backoffTimer = sendAfter(s.ctx.ActorSystem(), s.ctx.Self(), d, &backoffElapsed{name: c.spec.Name, token: c.downToken})
		} else {
			c.crashed, c.lastReason = true, text
		}
		s.stop(c) // one-for-one: nobody else is touched
		return
	}
	s.restarts = recent(s.restarts, now, s.opts.Window)
	if len(s.restarts) > s.opts.MaxRestarts {
		s.emit(Event{Kind: EventEscalated, Domain: c.spec.Domain, Child: c.spec.Name, Reason: text})
		s.escalate(fmt.Errorf("%w: child %q crashed %d times within %s, last: %s",
			ErrBudgetExhausted, c.spec.Name, len(s.restarts), s.opts.Window, text))
		return
	}
	c.crashed, c.lastReason = true, text
	if s.cut < 0 || c.idx < s.cut {
		s.cut = c.idx
	}
}

// recent appends now to times and drops the entries older than window.
func recent(times []time.Time, now time.Time, window time.Duration) []time.Time {
	times = append(times, now)
	i := 0
	for i < len(times) && now.Sub(times[i]) > window {
		i++
	}
	return times[i:]
}

func startError(name string, reason any) *StartError {
	var inner *StartError
	if err, ok := reason.(error); ok && errors.As(err, &inner) {
		path := name
		if inner.Child != "" {
			path += "/" + inner.Child
		}
		return &StartError{Child: path, Reason: inner.Reason, Err: inner.Err}
	}
	err, _ := reason.(error)
	return &StartError{Child: name, Reason: reasonText(reason), Err: err}
}

func (s *supervisor) escalate(err error) {
	if s.mode == modeEscalate {
		return
	}
	s.mode = modeEscalate
	s.escalation = err
	s.cut = -1
	s.cancelBackoffs()
	if s.booting && s.hooks != nil {
		// Start learns of a failed boot now, not after the teardown: a child stuck in its Started handler
		// can never be stopped, and Start must not hang on it.
		s.hooks.bootDone(err)
	}
}

// started records c's "started" report.
func (s *supervisor) started(c *child) {
	c.state = stateRunning
	stopTimer(&c.startTimer)
	c.upSince = time.Now()
	if c.wasDown {
		c.wasDown = false
		s.emit(Event{Kind: EventSubtreeUp, Domain: c.spec.Domain, Child: c.spec.Name})
	}
	if c.crashed {
		c.crashed = false
		s.emit(Event{Kind: EventChildRestarted, Domain: c.spec.Domain, Child: c.spec.Name, Reason: c.lastReason})
	}
}

// terminated records that c's incarnation is gone.
func (s *supervisor) terminated(c *child) {
	expected := c.state == stateStopping
	c.state = stateIdle
	c.pid = nil
	c.failed = false
	c.nested = false
	stopTimer(&c.startTimer)
	if !expected {
		// It stopped itself: a supervised child is permanent, so that counts as a crash.
		s.failure(c, "stopped by itself", false)
	}
}

// reconcile takes the next step towards what the mode asks for. One step at a time: while a child is
// stopping, nothing else happens; while one is starting, no other is spawned.
func (s *supervisor) reconcile() {
	if s.finished {
		return
	}
	for _, c := range s.children {
		if c.state == stateStopping {
			return
		}
	}
	if s.mode != modeRun {
		if c := s.lastLive(0); c != nil {
			s.stop(c)
			return
		}
		s.finish()
		return
	}
	if s.cut >= 0 {
		if c := s.lastLive(s.cut); c != nil {
			s.stop(c)
			return
		}
		s.cut = -1
	}
	for _, c := range s.children {
		if c.state == stateStarting {
			return
		}
	}
	for _, c := range s.children {
		if c.state == stateIdle && !c.down {
			s.spawn(c)
			return
		}
	}
	if s.booting {
		s.booting = false
		if s.reportStarted != nil {
			s.reportStarted()
			s.reportStarted = nil
		}
		if s.hooks != nil {
			s.hooks.bootDone(nil)
		}
	}
}

// lastLive returns the live child with the highest index not below from.
func (s *supervisor) lastLive(from int) *child {
	for i := len(s.children) - 1; i >= from; i-- {
		if st := s.children[i].state; st == stateStarting || st == stateRunning {
			return s.children[i]
		}
	}
	return nil
}

func (s *supervisor) spawn(c *child) {
	c.gen++
	opts := []actor.PropsOption{actor.WithReceiverMiddleware(startReporter(c.spec.Name, c.gen))}
	if s.opts.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(s.opts.Dispatcher))
	}
	props := c.spec.Props.Clone(opts...)
	pid, err := s.ctx.SpawnNamed(props, c.spec.Name)
	if err != nil {
		// The name is still registered: an invariant is broken (a stop was not waited for). Restarting
		// cannot help, so give up the same way an exhausted budget does.
		s.escalate(fmt.Errorf("supervision: cannot spawn child %q: %w", c.spec.Name, err))
		s.reconcile()
		return
	}
	c.pid = pid
	c.state = stateStarting
	c.startTimer = sendAfter(s.ctx.ActorSystem(), s.ctx.Self(), s.opts.StartTimeout, &startTimedOut{name: c.spec.Name, gen: c.gen})
}

// stop sends c's live incarnation on its way out; its Terminated moves it to idle.
func (s *supervisor) stop(c *child) {
	if c.state != stateStarting && c.state != stateRunning {
		return
	}
	nested := c.state == stateRunning && !c.failed && c.nested
	c.state = stateStopping
	stopTimer(&c.startTimer)
	if nested {
		// A running nested supervisor stops its own children in order before itself.
		s.ctx.Send(c.pid, &stopInOrder{})
		return
	}
	s.ctx.Stop(c.pid)
}

// finish runs once every child is gone in modeStop or modeEscalate.
func (s *supervisor) finish() {
	s.finished = true
	s.stopRequested = true // from here on, stopping itself is its own decision
	if s.mode == modeStop {
		if s.hooks != nil && s.booting {
			s.hooks.bootDone(ErrStopped)
		}
		s.ctx.Stop(s.ctx.Self())
		return
	}
	switch {
	case s.hooks != nil && s.booting:
		s.hooks.bootDone(s.escalation)
		s.ctx.Stop(s.ctx.Self())
	case s.hooks != nil:
		// The root: the instance must stop. The supervisor stays until Tree.Stop so that Stop and Fatal
		// never race.
		s.hooks.fail(s.escalation)
	case s.booting:
		s.escalateToParent(&startPanic{reason: s.escalation})
	default:
		s.escalateToParent(s.escalation)
	}
}

func (s *supervisor) escalateToParent(reason any) {
	if sup, ok := s.ctx.(actor.Supervisor); ok {
		sup.EscalateFailure(reason, nil)
		return
	}
	panic(reason) // the mailbox turns a panic into the same escalation
}

func (s *supervisor) cancelBackoffs() {
	for _, c := range s.children {
		if c.down {
			stopTimer(&c.backoffTimer)
			c.down = false
		}
	}
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// emit hands e to OnEvent. A panic there is logged and dropped: it would otherwise be taken for a crash of
// the supervisor itself, and protoactor would restart the whole tree for a broken event sink.
func (s *supervisor) emit(e Event) {
	if s.opts.OnEvent == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.ctx.Logger().Error("supervision: OnEvent panicked", "kind", e.Kind, "child", e.Child, "reason", reasonText(r))
		}
	}()
	s.opts.OnEvent(e)
}

func (h *treeHooks) bootDone(err error) {
	if !h.once.booted {
		h.once.booted = true
		h.booted <- err
	}
}

func (h *treeHooks) fail(err error) {
	if !h.once.fatal {
		h.once.fatal = true
		h.fatal <- err
		close(h.fatal)
	}
}

func (h *treeHooks) stopped() {
	if !h.once.done {
		h.once.done = true
		close(h.done)
	}
}
