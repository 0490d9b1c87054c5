package actors

import (
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// Dead letters are logged at most deadLetterBurst times per deadLetterInterval: a crashed actor's mailbox can
// turn into thousands of dead letters in a second, and the log must stay readable while it happens.
const (
	deadLetterInterval = 10 * time.Second
	deadLetterBurst    = 5
)

// NewSystem returns the actor system of one instance. protoactor's log lines are forwarded to log with the
// fields "component":"protoactor" and "instance"; dead letters are throttled and requests that end in a dead
// letter are not logged (their sender already gets a DeadLetterResponse). No metrics provider is installed.
// opts are applied after these defaults (tests use them to shorten the throttle interval).
func NewSystem(instance string, log zerolog.Logger, opts ...actor.ConfigOption) *actor.ActorSystem {
	plog := log.With().Str("component", "protoactor").Str("instance", instance).Logger()
	base := []actor.ConfigOption{
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(NewSlogHandler(plog))
		}),
		actor.WithDeadLetterThrottleInterval(deadLetterInterval),
		actor.WithDeadLetterThrottleCount(deadLetterBurst),
		actor.WithDeadLetterRequestLogging(false),
	}
	return actor.NewActorSystem(append(base, opts...)...)
}

// Name joins an instance name and the parts of an actor's path: Name("a", "core", "store") is "a/core/store".
func Name(instance string, parts ...string) string {
	if len(parts) == 0 {
		return instance
	}
	var b strings.Builder
	n := len(instance)
	for _, p := range parts {
		n += 1 + len(p)
	}
	b.Grow(n)
	b.WriteString(instance)
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(p)
	}
	return b.String()
}

// Live lists the ids of the actors still registered in system, sorted: after an instance stopped its tree
// none of its own may be left (protoactor's built-in processes are not listed), and one that is would keep
// its goroutines running once the system shuts down.
func Live(system *actor.ActorSystem) []string {
	var ids []string
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			// "$n" are unnamed processes, "future$n" a request's reply slot: neither is an actor of the tree.
			if !strings.HasPrefix(id, "$") && !strings.HasPrefix(id, "future") && id != "eventstream" && id != "deadletter" {
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return ids
}
