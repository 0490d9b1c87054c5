// Package task owns background goroutines. Every goroutine a component starts goes
// through a Group: Go starts it with the group's stop channel, Every runs a ticker, and
// Stop closes the channel and returns only once every goroutine of the group has
// returned, so whoever stops a component knows nothing of it runs any more.
//
// An actor keeps one Group per incarnation: it starts its tickers and tasks on
// *actor.Started and stops the group on *actor.Stopping and *actor.Restarting, so a
// restarted actor never shares a goroutine with its predecessor.
//
// The package sits under telemetry because telemetry is the one package every other
// may import (store may import nothing else); it imports the standard library only.
package task

import (
	"sync"
	"time"
)

// Group starts goroutines, tells them to stop and waits for them. The zero value is
// ready to use; a stopped group starts nothing again. Methods are safe for concurrent
// use, but Stop and Wait must not be called from one of the group's own goroutines
// (they would wait for themselves).
type Group struct {
	mu      sync.Mutex
	idle    sync.Cond // signalled when running drops to zero; L is mu
	running int
	stop    chan struct{}
	stopped bool
}

// Go runs fn in a new goroutine of the group; fn returns once stop is closed (or
// earlier, when its work is done). It reports false, and runs nothing, once the group
// is stopped: a caller must then treat the work as not started.
func (g *Group) Go(fn func(stop <-chan struct{})) bool {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return false
	}
	g.initLocked()
	g.running++
	stop := g.stop
	g.mu.Unlock()
	go func() {
		defer g.done()
		fn(stop)
	}()
	return true
}

// Every calls fn every d, from one goroutine of the group, until the group stops. fn
// should be short (typically a message to its actor): a slow fn delays Stop.
func (g *Group) Every(d time.Duration, fn func()) bool {
	return g.Go(func(stop <-chan struct{}) {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fn()
			case <-stop:
				return
			}
		}
	})
}

// Stop closes the group's stop channel, refuses new goroutines and waits for every
// running one to return. It may be called more than once.
func (g *Group) Stop() {
	g.mu.Lock()
	if !g.stopped {
		g.initLocked()
		g.stopped = true
		close(g.stop)
	}
	g.waitLocked()
	g.mu.Unlock()
}

// Wait waits for the running goroutines to return without asking them to stop (tasks
// that end on their own, such as a commit). The group may start more afterwards.
func (g *Group) Wait() {
	g.mu.Lock()
	g.waitLocked()
	g.mu.Unlock()
}

// Running reports how many goroutines of the group have not returned yet.
func (g *Group) Running() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running
}

func (g *Group) initLocked() {
	if g.stop == nil {
		g.stop = make(chan struct{})
		g.idle.L = &g.mu
	}
}

func (g *Group) waitLocked() {
	for g.running > 0 {
		g.idle.Wait()
	}
}

func (g *Group) done() {
	g.mu.Lock()
	g.running--
	if g.running == 0 {
		g.idle.Broadcast()
	}
	g.mu.Unlock()
}
