package supervision

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/actors"
	"github.com/ankusa-go/ankusa/test/poll"
)

// harness records what the test children do: a shared start/stop log, instance counters and events.
type harness struct {
	t   *testing.T
	sys *actor.ActorSystem

	mu      sync.Mutex
	log     []string
	starts  map[string]int
	events  []Event
	eventAt []time.Time
	// onStart decides, for the n-th instance (from 1) of a child, whether its Started handler panics,
	// sends itself a crash, or blocks on a channel.
	onStart map[string]func(n int) startBehaviour
}

type startBehaviour struct {
	panic bool
	crash bool
	block <-chan struct{}
}

type crash struct{}

func newHarness(t *testing.T) *harness {
	h := &harness{
		t:       t,
		sys:     actors.NewSystem("t", zerolog.Nop(), actor.WithDeadLetterThrottleInterval(10*time.Millisecond)),
		starts:  make(map[string]int),
		onStart: make(map[string]func(int) startBehaviour),
	}
	t.Cleanup(h.sys.Shutdown)
	return h
}

func (h *harness) record(s string) {
	h.mu.Lock()
	h.log = append(h.log, s)
	h.mu.Unlock()
}

// takeLog returns the log so far and empties it.
func (h *harness) takeLog() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.log
	h.log = nil
	return l
}

func (h *harness) logLen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.log)
}

func (h *harness) instances(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.starts[name]
}

func (h *harness) onEvent(e Event) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.eventAt = append(h.eventAt, time.Now())
	h.mu.Unlock()
}

// event returns the i-th event of kind, and when it was emitted.
func (h *harness) event(kind string, i int) (Event, time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for j, e := range h.events {
		if e.Kind == kind {
			if i == 0 {
				return e, h.eventAt[j], true
			}
			i--
		}
	}
	return Event{}, time.Time{}, false
}

func (h *harness) props(name string) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return actor.ReceiveFunc(func(ctx actor.Context) {
			switch ctx.Message().(type) {
			case *actor.Started:
				h.mu.Lock()
				h.starts[name]++
				n := h.starts[name]
				decide := h.onStart[name]
				h.log = append(h.log, "start "+name)
				h.mu.Unlock()
				var b startBehaviour
				if decide != nil {
					b = decide(n)
				}
				if b.block != nil {
					<-b.block
				}
				if b.panic {
					panic("boom in " + name)
				}
				if b.crash {
					ctx.Send(ctx.Self(), &crash{})
				}
			case *actor.Stopping:
				h.record("stop " + name)
			case *crash:
				panic("crash " + name)
			}
		})
	})
}

func (h *harness) spec(name string) ChildSpec {
	return ChildSpec{Name: name, Props: h.props(name), Domain: "core"}
}

func (h *harness) isolated(name string, d Domain) ChildSpec {
	return ChildSpec{Name: name, Props: h.props(name), Domain: d, Isolated: true}
}

func (h *harness) crash(id string) {
	h.sys.Root.Send(h.sys.NewLocalPID(id), &crash{})
}

func (h *harness) start(children []ChildSpec, opts Options) *Tree {
	h.t.Helper()
	if opts.OnEvent == nil {
		opts.OnEvent = h.onEvent
	}
	tree, err := Start(h.sys, "root", children, opts)
	if err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	h.t.Cleanup(func() {
		if err := tree.Stop(5 * time.Second); err != nil {
			h.t.Errorf("Stop: %v", err)
		}
	})
	return tree
}

// waitLog waits until the log holds n entries, then returns and empties it.
func (h *harness) waitLog(n int) []string {
	h.t.Helper()
	poll.True(h.t, 5*time.Second, fmt.Sprintf("%d log entries", n), func() bool { return h.logLen() >= n })
	// Anything beyond n would be a step too many: give it a moment to show up.
	time.Sleep(20 * time.Millisecond)
	return h.takeLog()
}

func expectLog(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("log\n got %q\nwant %q", got, want)
	}
}

// DESIGN.md §3: "a crash of child i stops i+1..n (in reverse), restarts i, then starts i+1..n again in order."
func TestCrashStopsLaterChildrenInReverseAndRestartsThemInOrder(t *testing.T) {
	h := newHarness(t)
	tree := h.start([]ChildSpec{h.spec("one"), h.spec("two"), h.spec("three"), h.spec("four")}, Options{})
	expectLog(t, h.takeLog(), "start one", "start two", "start three", "start four")

	h.crash(tree.PID().Id + "/two")
	// The crashed child is stopped (stop + spawn) after its dependents, so it runs its clean-up too.
	expectLog(t, h.waitLog(6), "stop four", "stop three", "stop two", "start two", "start three", "start four")
	if n := h.instances("one"); n != 1 {
		t.Fatalf("child one started %d times, want 1: children before the crashed one are never touched", n)
	}
	e, _, ok := h.event(EventChildRestarted, 0)
	if !ok || e.Child != "two" || e.Reason != "crash two" || e.Domain != "core" {
		t.Fatalf("child_restarted event = %+v (found %v)", e, ok)
	}

	// The restarted children are live: a crash of the last one restarts it alone.
	h.crash(tree.PID().Id + "/four")
	expectLog(t, h.waitLog(2), "stop four", "start four")
}

// DESIGN.md §3 (rest-for-one), tree teardown: later children depend on earlier ones, so they go first.
func TestStopStopsChildrenInReverseOrder(t *testing.T) {
	h := newHarness(t)
	tree, err := Start(h.sys, "root", []ChildSpec{h.spec("one"), h.spec("two"), h.spec("three"), h.spec("four")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.takeLog()
	if err := tree.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	expectLog(t, h.takeLog(), "stop four", "stop three", "stop two", "stop one")
	select {
	case <-tree.Done():
	default:
		t.Fatal("Done not closed after Stop returned")
	}
	if _, ok := h.sys.ProcessRegistry.Get(tree.PID()); ok {
		t.Fatal("supervisor still registered after Stop")
	}
}

// Inventory I.2 / DESIGN.md §3: the core restart budget is finite; past it the instance must stop, never loop.
// Each new instance of "two" crashes right after it started, so its "started" report races its failure
// notice (which overtakes ordinary messages): the supervisor must neither wedge nor miscount.
func TestCoreBudgetExhaustedEscalatesAndFiresFatal(t *testing.T) {
	h := newHarness(t)
	h.onStart["two"] = func(n int) startBehaviour { return startBehaviour{crash: n >= 2} }
	tree := h.start([]ChildSpec{h.spec("one"), h.spec("two"), h.spec("three")}, Options{MaxRestarts: 2, Window: time.Minute})
	h.takeLog()

	h.crash(tree.PID().Id + "/two")
	var err error
	select {
	case err = <-tree.Fatal():
	case <-time.After(5 * time.Second):
		t.Fatal("Fatal did not fire")
	}
	if !errors.Is(err, ErrBudgetExhausted) || !strings.Contains(err.Error(), `"two"`) {
		t.Fatalf("Fatal error = %v, want ErrBudgetExhausted naming two", err)
	}
	if _, ok := <-tree.Fatal(); ok {
		t.Fatal("Fatal not closed after its error")
	}
	e, _, ok := h.event(EventEscalated, 0)
	if !ok || e.Child != "two" || e.Reason != "crash two" {
		t.Fatalf("escalated event = %+v (found %v)", e, ok)
	}
	if n := h.instances("two"); n != 3 {
		t.Fatalf("two started %d times, want 3 (MaxRestarts=2, the third crash escalates)", n)
	}
	// Escalating stops every child, last first; no restart follows. (Whether three was started again
	// between the crashes depends on which notice of two arrived first, so count instead of matching.)
	log := h.takeLog()
	for _, name := range []string{"one", "two", "three"} {
		starts, stops := 0, 0
		for _, l := range log {
			switch l {
			case "start " + name:
				starts++
			case "stop " + name:
				stops++
			}
		}
		if stops != starts+1 {
			t.Fatalf("%s: %d starts and %d stops after the first crash, want every instance stopped: %q", name, starts, stops, log)
		}
	}
	if i2, i1 := lastIndex(log, "stop two"), lastIndex(log, "stop one"); i1 != len(log)-1 || i2 > i1 ||
		lastIndex(log, "stop three") > i2 {
		t.Fatalf("log after escalation %q, want it to end with a reverse-order teardown", log)
	}
	time.Sleep(30 * time.Millisecond)
	if l := h.takeLog(); len(l) != 0 {
		t.Fatalf("activity after escalation: %q", l)
	}
}

// DESIGN.md §3: "Optional domains are isolated: their crash never touches ingest." Inventory I.2: own restart
// budget; when exhausted, restarted later with back-off; emits subtree_down/up.
func TestIsolatedChildPastItsBudgetGoesDownAndComesBackAlone(t *testing.T) {
	h := newHarness(t)
	min := 40 * time.Millisecond
	tree := h.start([]ChildSpec{h.spec("one"), h.isolated("metrics", "metrics"), h.spec("three")}, Options{
		MaxRestarts: 1, Window: time.Minute, BackoffMin: min, BackoffMax: time.Second,
		Rand: func() float64 { return 0.5 },
	})
	h.takeLog()
	id := tree.PID().Id + "/metrics"

	// Within its budget: one-for-one.
	h.crash(id)
	expectLog(t, h.waitLog(2), "stop metrics", "start metrics")

	// Past it: down for a jittered back-off in [min/2, min], then up again; siblings untouched throughout.
	h.crash(id)
	expectLog(t, h.waitLog(2), "stop metrics", "start metrics")
	down, downAt, ok := h.event(EventSubtreeDown, 0)
	if !ok || down.Child != "metrics" || down.Domain != "metrics" || down.Reason != "crash metrics" {
		t.Fatalf("subtree_down = %+v (found %v)", down, ok)
	}
	if down.Delay < min/2 || down.Delay > min {
		t.Fatalf("first back-off %s outside [%s, %s]", down.Delay, min/2, min)
	}
	poll.True(t, 5*time.Second, "subtree_up", func() bool { _, _, ok := h.event(EventSubtreeUp, 0); return ok })
	up, upAt, _ := h.event(EventSubtreeUp, 0)
	if up.Child != "metrics" || upAt.Sub(downAt) < down.Delay {
		t.Fatalf("subtree_up %+v after %s, want after the %s back-off", up, upAt.Sub(downAt), down.Delay)
	}

	// The budget is fresh after subtree_up, and the next outage waits twice as long.
	h.crash(id)
	expectLog(t, h.waitLog(2), "stop metrics", "start metrics")
	h.crash(id)
	expectLog(t, h.waitLog(2), "stop metrics", "start metrics")
	down2, _, ok := h.event(EventSubtreeDown, 1)
	if !ok || down2.Delay < min || down2.Delay > 2*min {
		t.Fatalf("second back-off %+v, want within [%s, %s]", down2, min, 2*min)
	}
	poll.True(t, 5*time.Second, "the second subtree_up", func() bool { _, _, ok := h.event(EventSubtreeUp, 1); return ok })

	if a, b := h.instances("one"), h.instances("three"); a != 1 || b != 1 {
		t.Fatalf("siblings restarted: one=%d three=%d, want 1 and 1", a, b)
	}
	if _, _, ok := h.event(EventEscalated, 0); ok {
		t.Fatal("an isolated child's crashes escalated")
	}
}

// DESIGN.md §3: "A child that cannot start at boot fails the boot with a precise error."
func TestChildPanickingInStartedFailsStartNamingIt(t *testing.T) {
	h := newHarness(t)
	h.onStart["two"] = func(int) startBehaviour { return startBehaviour{panic: true} }
	tree, err := Start(h.sys, "root", []ChildSpec{h.spec("one"), h.spec("two"), h.spec("three")}, Options{})
	if err == nil {
		_ = tree.Stop(time.Second)
		t.Fatal("Start succeeded")
	}
	var se *StartError
	if !errors.As(err, &se) || se.Child != "two" || se.Reason != "boom in two" {
		t.Fatalf("Start error %v, want a *StartError for two with its panic", err)
	}
	if !strings.Contains(err.Error(), `"two"`) || !strings.Contains(err.Error(), "boom in two") {
		t.Fatalf("error text %q does not name the child and the reason", err)
	}
	// Start returns with the started children stopped, last first, and nothing after the failed one spawned.
	expectLog(t, h.takeLog(), "start one", "start two", "stop two", "stop one")
	if n := h.instances("two"); n != 1 {
		t.Fatalf("two started %d times: a failure to start at boot is not retried", n)
	}
}

// DESIGN.md §3: a child that cannot start fails the boot, including one that never reports started.
func TestChildNotReportingStartedWithinStartTimeoutFailsStart(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	h.onStart["slow"] = func(int) startBehaviour { return startBehaviour{block: release} }
	_, err := Start(h.sys, "root", []ChildSpec{h.spec("one"), h.spec("slow")}, Options{StartTimeout: 50 * time.Millisecond})
	var se *StartError
	if !errors.As(err, &se) || se.Child != "slow" || !strings.Contains(se.Reason, "did not report started") {
		t.Fatalf("Start error %v, want a start timeout of slow", err)
	}
	close(release) // the stuck handler returns; the pending stop then completes the teardown
	poll.True(t, 5*time.Second, "the teardown", func() bool {
		_, ok := h.sys.ProcessRegistry.Get(h.sys.NewLocalPID("root"))
		return !ok
	})
	expectLog(t, h.takeLog(), "start one", "start slow", "stop slow", "stop one")
}

func TestInvalidSpecsAreRefused(t *testing.T) {
	h := newHarness(t)
	f := func(children ...ChildSpec) {
		t.Helper()
		if _, err := Start(h.sys, "root", children, Options{}); !errors.Is(err, ErrInvalidSpec) {
			t.Fatalf("Start(%v) = %v, want ErrInvalidSpec", children, err)
		}
	}
	f(ChildSpec{Props: h.props("x")})
	f(h.spec("a"), h.spec("a"))
	f(ChildSpec{Name: "a"})
}

// edgeTree is root: a, edge{w, x, y}, z with the edge subtree nested (DESIGN.md §3, child 6).
func edgeTree(h *harness, edgeOpts Options) []ChildSpec {
	edgeOpts.OnEvent = h.onEvent
	edge := NewProps([]ChildSpec{h.spec("w"), h.spec("x"), h.spec("y")}, edgeOpts)
	return []ChildSpec{h.spec("a"), {Name: "edge", Props: edge, Domain: "core"}, h.spec("z")}
}

// DESIGN.md §3, child 6: "edge subtree (rest-for-one)": a crash inside it restarts only its own tail; the
// root's later children are untouched, and the whole tree stops in reverse order through the nesting.
func TestNestedTreeRestartsOnlyItsOwnTail(t *testing.T) {
	h := newHarness(t)
	tree, err := Start(h.sys, "root", edgeTree(h, Options{}), Options{OnEvent: h.onEvent})
	if err != nil {
		t.Fatal(err)
	}
	// The root spawns z only once the nested tree reported that all of its children started.
	expectLog(t, h.takeLog(), "start a", "start w", "start x", "start y", "start z")

	h.crash(tree.PID().Id + "/edge/x")
	expectLog(t, h.waitLog(4), "stop y", "stop x", "start x", "start y")
	for _, name := range []string{"a", "w", "z"} {
		if n := h.instances(name); n != 1 {
			t.Fatalf("%s started %d times, want 1", name, n)
		}
	}

	if err := tree.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	expectLog(t, h.takeLog(), "stop z", "stop y", "stop x", "stop w", "stop a")
}

// A nested tree past its own budget gives up as a whole and is restarted by its parent as one core child:
// rest-for-one one level up (the root's later child z stops and starts again; a is untouched).
func TestNestedTreePastItsBudgetIsRestartedByItsParent(t *testing.T) {
	h := newHarness(t)
	tree := h.start(edgeTree(h, Options{MaxRestarts: -1}), Options{})
	h.takeLog()

	h.crash(tree.PID().Id + "/edge/x")
	expectLog(t, h.waitLog(8),
		"stop y", "stop x", "stop w", // the nested tree tears itself down, last first, and escalates
		"stop z", // the root stops what came after it
		"start w", "start x", "start y", "start z")
	if n := h.instances("a"); n != 1 {
		t.Fatalf("a started %d times, want 1", n)
	}
	e, _, ok := h.event(EventEscalated, 0)
	if !ok || e.Child != "x" {
		t.Fatalf("escalated event = %+v (found %v)", e, ok)
	}
	r, _, ok := h.event(EventChildRestarted, 0)
	if !ok || r.Child != "edge" || !strings.Contains(r.Reason, "restart budget exhausted") {
		t.Fatalf("child_restarted event = %+v (found %v)", r, ok)
	}
}

// A failure to start deep in a nested tree fails the boot with the path of the child that failed.
func TestNestedChildFailingToStartFailsStartWithItsPath(t *testing.T) {
	h := newHarness(t)
	h.onStart["x"] = func(int) startBehaviour { return startBehaviour{panic: true} }
	_, err := Start(h.sys, "root", edgeTree(h, Options{}), Options{})
	var se *StartError
	if !errors.As(err, &se) || se.Child != "edge/x" || se.Reason != "boom in x" {
		t.Fatalf("Start error %v, want a *StartError for edge/x", err)
	}
	expectLog(t, h.takeLog(), "start a", "start w", "start x", "stop x", "stop w", "stop a")
}

func lastIndex(log []string, s string) int {
	for i := len(log) - 1; i >= 0; i-- {
		if log[i] == s {
			return i
		}
	}
	return -1
}

// A supervisor stopped by protoactor itself (a system Stop rather than Tree.Stop) lets its children go: the
// terminations that follow are not crashes to repair.
func TestSupervisorStoppedFromOutsideDoesNotRespawn(t *testing.T) {
	h := newHarness(t)
	tree, err := Start(h.sys, "root", []ChildSpec{h.spec("one"), h.isolated("two", "metrics"), h.spec("three")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.takeLog()
	if err := h.sys.Root.StopFuture(tree.PID()).Wait(); err != nil {
		t.Fatal(err)
	}
	<-tree.Done()
	if err := <-tree.Fatal(); !errors.Is(err, ErrTreeStopped) {
		t.Fatalf("Fatal = %v, want ErrTreeStopped", err)
	}
	time.Sleep(20 * time.Millisecond)
	log := h.takeLog()
	slices.Sort(log)
	expectLog(t, log, "stop one", "stop three", "stop two")
	for _, name := range []string{"one", "two", "three"} {
		if _, ok := h.sys.ProcessRegistry.Get(h.sys.NewLocalPID("root/" + name)); ok {
			t.Fatalf("%s still registered", name)
		}
	}
}

// A nested supervisor with an unusable child list fails the boot under its own name.
func TestNestedInvalidSpecFailsStartNamingTheNestedTree(t *testing.T) {
	h := newHarness(t)
	bad := NewProps([]ChildSpec{h.spec("w"), h.spec("w")}, Options{})
	_, err := Start(h.sys, "root", []ChildSpec{h.spec("a"), {Name: "edge", Props: bad}}, Options{})
	var se *StartError
	if !errors.As(err, &se) || se.Child != "edge" || !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("Start error %v, want a *StartError for edge wrapping ErrInvalidSpec", err)
	}
	expectLog(t, h.takeLog(), "start a", "stop a")
}

// countingDispatcher runs each mailbox run on a goroutine of its own, as protoactor's default does, and counts
// the runs.
type countingDispatcher struct{ runs atomic.Int64 }

func (d *countingDispatcher) Schedule(fn func()) { d.runs.Add(1); go fn() }
func (d *countingDispatcher) Throughput() int    { return 300 }

// Options.Dispatcher runs the children's mailboxes, a restarted child's and a nested tree's children's too.
func TestChildrenRunOnTheOptionsDispatcher(t *testing.T) {
	h := newHarness(t)
	d := &countingDispatcher{}
	nested := ChildSpec{Name: "inner", Domain: "core",
		Props: NewProps([]ChildSpec{h.spec("leaf")}, Options{Dispatcher: d})}
	h.start([]ChildSpec{h.spec("one"), nested}, Options{Dispatcher: d})
	expectLog(t, h.waitLog(2), "start one", "start leaf")
	before := d.runs.Load()
	if before < 3 {
		t.Fatalf("%d mailbox runs on the dispatcher after one, inner and leaf started, want at least 3", before)
	}
	h.crash("root/one")
	// rest-for-one: inner (and its leaf) stop, one restarts, then inner and its leaf start again.
	poll.True(t, 5*time.Second, "one and leaf started again", func() bool {
		return h.instances("one") == 2 && h.instances("leaf") == 2
	})
	// The crash message, the restart and the new incarnation's start all ran through it.
	if after := d.runs.Load(); after < before+3 {
		t.Fatalf("%d mailbox runs on the dispatcher across a restart, want at least 3 more than %d", after, before)
	}
}
