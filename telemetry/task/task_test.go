package task

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ankusa-go/ankusa/test/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The helper's promise: when Stop returns, every goroutine the group started has
// returned (goleak then finds none), including one that is busy when Stop is called.
func TestStopWaitsForEveryGoroutine(t *testing.T) {
	var g Group
	var ended atomic.Int32
	busy := make(chan struct{})
	release := make(chan struct{})
	for range 5 {
		if !g.Go(func(stop <-chan struct{}) {
			<-stop
			ended.Add(1)
		}) {
			t.Fatal("Go refused on a running group")
		}
	}
	// One task ignores stop until it is released: Stop must wait for it too.
	g.Go(func(<-chan struct{}) {
		close(busy)
		<-release
		ended.Add(1)
	})
	<-busy
	stopped := make(chan struct{})
	go func() {
		g.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a task was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	if n := ended.Load(); n != 6 {
		t.Fatalf("%d of 6 goroutines returned before Stop did", n)
	}
	if n := g.Running(); n != 0 {
		t.Fatalf("Running() = %d after Stop", n)
	}
}

// A stopped group starts nothing: the caller is told, so work it hands over is not
// silently dropped (a dispatch attempt then leaves its row claimed).
func TestGoAfterStopRunsNothing(t *testing.T) {
	var g Group
	g.Stop()
	g.Stop() // idempotent
	ran := atomic.Bool{}
	if g.Go(func(<-chan struct{}) { ran.Store(true) }) {
		t.Fatal("Go accepted work on a stopped group")
	}
	if g.Every(time.Millisecond, func() { ran.Store(true) }) {
		t.Fatal("Every accepted work on a stopped group")
	}
	if ran.Load() {
		t.Fatal("a stopped group ran work")
	}
}

// Every ticks until Stop, and no tick runs after Stop returned.
func TestEveryTicksUntilStop(t *testing.T) {
	var g Group
	var ticks atomic.Int64
	g.Every(time.Millisecond, func() { ticks.Add(1) })
	poll.True(t, 5*time.Second, "three ticks", func() bool { return ticks.Load() >= 3 })
	g.Stop()
	after := ticks.Load()
	time.Sleep(10 * time.Millisecond) // a tick that escaped Stop would land here
	if n := ticks.Load(); n != after {
		t.Fatalf("%d ticks after Stop returned", n-after)
	}
}

// Wait waits for tasks that end on their own without stopping the group.
func TestWaitLeavesTheGroupRunning(t *testing.T) {
	var g Group
	var done atomic.Int32
	for range 3 {
		g.Go(func(<-chan struct{}) { done.Add(1) })
	}
	g.Wait()
	if done.Load() != 3 {
		t.Fatalf("Wait returned with %d of 3 tasks done", done.Load())
	}
	if !g.Go(func(<-chan struct{}) { done.Add(1) }) {
		t.Fatal("Wait stopped the group")
	}
	g.Stop()
	if done.Load() != 4 {
		t.Fatal("Stop returned before the last task")
	}
}

// Go and Stop from many goroutines at once: every accepted task runs and is waited
// for, none is accepted after Stop (run with -race).
func TestConcurrentGoAndStop(t *testing.T) {
	var g Group
	var accepted, ran atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if g.Go(func(<-chan struct{}) { ran.Add(1) }) {
					accepted.Add(1)
				}
			}
		}()
	}
	g.Stop()
	n := ran.Load()
	wg.Wait()
	if ran.Load() != n || accepted.Load() != n {
		t.Fatalf("accepted %d, ran %d by Stop, %d now: a task ran after Stop", accepted.Load(), n, ran.Load())
	}
}
