package actors

import (
	"errors"
	"github.com/ankusa-go/ankusa/test/capture"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// DESIGN.md §"Actors": protoactor's own logger is bridged to zerolog.
func TestProtoactorLogsAreStructuredZerologLines(t *testing.T) {
	var buf capture.Buffer
	sys := NewSystem("inst-a", zerolog.New(&buf))
	defer sys.Shutdown()

	lines := buf.Lines(t)
	var found map[string]any
	for _, l := range lines {
		if l["message"] == "actor system started" {
			found = l
		}
	}
	if found == nil {
		t.Fatalf("no \"actor system started\" line in %v", lines)
	}
	if found["component"] != "protoactor" || found["instance"] != "inst-a" || found["level"] != "info" {
		t.Fatalf("line lacks component/instance/level: %v", found)
	}
	if found["id"] != sys.ID {
		t.Fatalf("id attribute = %v, want %s", found["id"], sys.ID)
	}
}

type secretMessage struct{ Body string }

// STYLE.md §"Actors": dead letters throttled; a message's contents never reach a log line.
func TestDeadLettersAreThrottledAndRedacted(t *testing.T) {
	var buf capture.Buffer
	sys := NewSystem("inst-a", zerolog.New(&buf), actor.WithDeadLetterThrottleInterval(300*time.Millisecond))
	defer sys.Shutdown()

	nobody := sys.NewLocalPID("inst-a/nobody")
	const sent = 200
	for range sent {
		sys.Root.Send(nobody, &secretMessage{Body: "hunter2"})
	}
	// The throttle reports how many lines it swallowed once its interval ends.
	summary := func() map[string]any {
		for _, l := range buf.Lines(t) {
			if l["message"] == "[DeadLetter]" && l["throttled"] != nil {
				return l
			}
		}
		return nil
	}
	poll.True(t, 5*time.Second, "the throttle summary line", func() bool { return summary() != nil })

	var logged int
	for _, l := range buf.Lines(t) {
		if l["message"] != "[DeadLetter]" || l["throttled"] != nil {
			continue
		}
		logged++
		if l["message_type"] != "*actors.secretMessage" || !strings.Contains(l["pid"].(string), "nobody") {
			t.Fatalf("unexpected dead-letter line %v", l)
		}
	}
	if logged == 0 || logged > deadLetterBurst {
		t.Fatalf("%d dead-letter lines logged, want 1..%d", logged, deadLetterBurst)
	}
	if got := int(summary()["throttled"].(float64)); got < sent-deadLetterBurst {
		t.Fatalf("throttled %d of %d, want at least %d", got, sent, sent-deadLetterBurst)
	}
	raw := buf.String()
	if strings.Contains(raw, "hunter2") {
		t.Fatalf("a message body reached the log: %s", raw)
	}
}

func TestSlogHandlerKeepsLevelsGroupsAndAttributes(t *testing.T) {
	var buf capture.Buffer
	l := slog.New(NewSlogHandler(zerolog.New(&buf).Level(zerolog.InfoLevel)))
	l.Debug("dropped")
	l.With("a", 1).WithGroup("g").Warn("hello", "b", true, slog.Group("sub", "c", "x"), "d", time.Second,
		"err", errors.New("bad"))
	lines := buf.Lines(t)
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1 (debug below the logger level): %v", len(lines), lines)
	}
	got := lines[0]
	want := map[string]any{"level": "warn", "message": "hello", "a": float64(1), "g.b": true, "g.sub.c": "x",
		"g.d": float64(1000), "g.err": "bad"}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("field %q = %v (%T), want %v; line %v", k, got[k], got[k], v, got)
		}
	}
}

func TestNameJoinsInstanceDomainAndName(t *testing.T) {
	f := func(want, instance string, parts ...string) {
		t.Helper()
		if got := Name(instance, parts...); got != want {
			t.Fatalf("Name(%q, %q) = %q, want %q", instance, parts, got, want)
		}
	}
	f("a", "a")
	f("a/core/store", "a", "core", "store")
	f("a/edge/batcher-3", "a", "edge", "batcher-3")
}

type ping struct{}

// A chaos test arms one actor by id: that actor, and no other, crashes on its next message, once.
func TestKillCrashesExactlyTheArmedActorOnce(t *testing.T) {
	sys := NewSystem("inst-k", zerolog.Nop())
	defer sys.Shutdown()
	kill := NewKill()

	var crashes sync.Map // id -> reason
	sub := sys.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok {
			crashes.Store(e.Child.Id, e.Reason)
		}
	})
	defer sys.EventStream.Unsubscribe(sub)

	type counters struct{ starts, pings atomic.Int32 }
	spawn := func(name string) (*actor.PID, *counters) {
		c := &counters{}
		props := actor.PropsFromFunc(func(ctx actor.Context) {
			switch ctx.Message().(type) {
			case *actor.Started:
				c.starts.Add(1)
			case *ping:
				c.pings.Add(1)
			}
		}, actor.WithReceiverMiddleware(WithKillInjection(kill)))
		pid, err := sys.Root.SpawnNamed(props, Name("inst-k", "core", name))
		if err != nil {
			t.Fatal(err)
		}
		return pid, c
	}
	a, ac := spawn("a")
	b, bc := spawn("b")
	defer func() {
		_ = sys.Root.StopFuture(a).Wait()
		_ = sys.Root.StopFuture(b).Wait()
	}()

	kill.Arm(a.Id)
	if !kill.Armed(a.Id) || kill.Armed(b.Id) {
		t.Fatal("Armed does not reflect Arm")
	}
	sys.Root.Send(b, &ping{})
	sys.Root.Send(a, &ping{})
	poll.True(t, 5*time.Second, "a to be restarted", func() bool { return ac.starts.Load() == 2 })
	for range 3 {
		sys.Root.Send(a, &ping{})
		sys.Root.Send(b, &ping{})
	}
	poll.True(t, 5*time.Second, "the pings after the crash", func() bool {
		return ac.pings.Load() == 3 && bc.pings.Load() == 4
	})
	if kill.Armed(a.Id) {
		t.Fatal("Kill still armed after it fired")
	}
	if bc.starts.Load() != 1 {
		t.Fatalf("b started %d times, want 1 (never crashed)", bc.starts.Load())
	}
	reason, ok := crashes.Load(a.Id)
	if !ok {
		t.Fatal("no supervision event for a")
	}
	if err, _ := reason.(error); !errors.Is(err, ErrKilled) {
		t.Fatalf("crash reason %v, want ErrKilled", reason)
	}
	if _, ok := crashes.Load(b.Id); ok {
		t.Fatal("b crashed")
	}
	if ac.starts.Load() != 2 {
		t.Fatalf("a started %d times, want 2 (one crash)", ac.starts.Load())
	}
}

// ArmPrefix crashes one actor of a family whose names are not known in advance (the dispatch lanes), once.
func TestKillArmPrefixCrashesOneMatchingActorOnce(t *testing.T) {
	kill := NewKill()
	kill.ArmPrefix("i/dispatch/scheduler/lane-")
	if !kill.PrefixArmed("i/dispatch/scheduler/lane-") {
		t.Fatal("PrefixArmed does not reflect ArmPrefix")
	}
	if kill.fire("i/dispatch/scheduler") {
		t.Fatal("an actor outside the prefix fired")
	}
	if !kill.fire("i/dispatch/scheduler/lane-7") {
		t.Fatal("the first matching actor did not fire")
	}
	if kill.fire("i/dispatch/scheduler/lane-8") || kill.PrefixArmed("i/dispatch/scheduler/lane-") {
		t.Fatal("the prefix fired twice")
	}
	if kill.armedN.Load() != 0 {
		t.Fatalf("armedN %d after every arm fired", kill.armedN.Load())
	}
}

// Live is how an instance finds the actors its tree left behind: it names a spawned actor until that actor
// has stopped, and never protoactor's own processes.
func TestLiveNamesTheActorsStillRegistered(t *testing.T) {
	system := NewSystem("live", zerolog.Nop())
	defer system.Shutdown()
	if left := Live(system); len(left) != 0 {
		t.Fatalf("a new system lists %v", left)
	}
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), "live/one")
	if err != nil {
		t.Fatal(err)
	}
	if left := Live(system); len(left) != 1 || left[0] != "live/one" {
		t.Fatalf("with one actor spawned: %v", left)
	}
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if left := Live(system); len(left) != 0 {
		t.Fatalf("after its stop: %v", left)
	}
}
