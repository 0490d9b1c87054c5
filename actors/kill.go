package actors

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Kill crashes chosen actors on purpose, for chaos tests: after Arm(id), the next ordinary message the actor
// with that PID id receives makes it panic with a *KilledError, once. It belongs to one instance; the zero
// value is not usable, build it with NewKill.
type Kill struct {
	armedN   atomic.Int32 // len(armed) + len(prefixes); read on every message so an idle Kill costs one atomic load
	mu       sync.Mutex
	armed    map[string]struct{}
	prefixes map[string]struct{}
}

// NewKill returns a Kill with nothing armed.
func NewKill() *Kill {
	return &Kill{armed: make(map[string]struct{}), prefixes: make(map[string]struct{})}
}

// ArmPrefix makes the next ordinary message received by any actor whose PID id starts with prefix panic, once:
// the way to crash one of a family of actors whose names are not known in advance (the dispatch lanes,
// <instance>/dispatch/scheduler/lane-<n>).
func (k *Kill) ArmPrefix(prefix string) {
	k.mu.Lock()
	if _, ok := k.prefixes[prefix]; !ok {
		k.prefixes[prefix] = struct{}{}
		k.armedN.Add(1)
	}
	k.mu.Unlock()
}

// PrefixArmed reports whether prefix is armed and has not fired yet.
func (k *Kill) PrefixArmed(prefix string) bool {
	k.mu.Lock()
	_, ok := k.prefixes[prefix]
	k.mu.Unlock()
	return ok
}

// Arm makes the next ordinary message received by the actor whose PID id is id panic. Arming an id twice
// before it fires crashes the actor once.
func (k *Kill) Arm(id string) {
	k.mu.Lock()
	if _, ok := k.armed[id]; !ok {
		k.armed[id] = struct{}{}
		k.armedN.Add(1)
	}
	k.mu.Unlock()
}

// Armed reports whether id is armed and has not fired yet.
func (k *Kill) Armed(id string) bool {
	k.mu.Lock()
	_, ok := k.armed[id]
	k.mu.Unlock()
	return ok
}

// fire disarms id and reports whether it was armed.
func (k *Kill) fire(id string) bool {
	if k.armedN.Load() == 0 {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.armed[id]; ok {
		delete(k.armed, id)
		k.armedN.Add(-1)
		return true
	}
	for p := range k.prefixes {
		if strings.HasPrefix(id, p) {
			delete(k.prefixes, p)
			k.armedN.Add(-1)
			return true
		}
	}
	return false
}

// WithKillInjection returns a receiver middleware that lets k crash the actor. Lifecycle messages (Started,
// Stopping, Stopped, Restarting) never fire it: a crash there would be a failure to start or to stop, which is
// not what a chaos test of a live actor means.
func WithKillInjection(k *Kill) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			switch env.Message.(type) {
			case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
			default:
				if id := c.Self().Id; k.fire(id) {
					panic(&KilledError{Actor: id})
				}
			}
			next(c, env)
		}
	}
}
