package instance

import (
	"fmt"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/lifecycle"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/builtin"
	"github.com/ankusa-go/ankusa/supervision"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// LifecycleName is the lifecycle publisher's child in the instance tree.
const LifecycleName = "lifecycle"

// buildLifecycle builds the sinks of lifecycle.sinks (closing those it built when one fails).
func (i *Instance) buildLifecycle() error {
	reg := builtin.NewRegistry()
	deps := sinks.Deps{Instance: i.cfg.Instance, Log: i.log}
	for n, spec := range i.cfg.Lifecycle.Sinks {
		s, err := reg.New(spec, deps)
		if err != nil {
			i.closeLifecycle()
			return fmt.Errorf("lifecycle.sinks[%d]: %w", n, err)
		}
		i.lifecycle = append(i.lifecycle, lifecycle.Target{Name: strconv.Itoa(n), Sink: s})
	}
	return nil
}

func (i *Instance) closeLifecycle() {
	for _, t := range i.lifecycle {
		_ = t.Sink.Close()
	}
	i.lifecycle = nil
}

// lifecycleChild is the publisher, its own failure domain: a sink that is down only holds the cursor.
func (i *Instance) lifecycleChild() supervision.ChildSpec {
	return supervision.ChildSpec{Name: LifecycleName, Domain: "lifecycle", Isolated: true,
		Props: i.withKill(actor.PropsFromProducer(func() actor.Actor {
			return &lifecyclePublisher{p: &lifecycle.Publisher{DB: i.db.Load, Node: i.cfg.NodeID(),
				Targets: i.lifecycle, Metrics: i.tel, Replays: i.tel,
				Log: i.log.With().Str("component", "lifecycle").Logger()}}
		}))}
}

// lifecyclePublisher runs the publisher's loop in a task group of its incarnation.
type lifecyclePublisher struct {
	p     *lifecycle.Publisher
	tasks *task.Group
}

func (a *lifecyclePublisher) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		a.tasks = &task.Group{}
		a.tasks.Go(a.p.Run)
	case *actor.Stopping, *actor.Restarting:
		if a.tasks != nil {
			a.tasks.Stop()
			a.tasks = nil
		}
	}
}
