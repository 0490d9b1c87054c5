package sinks

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
)

// Deps is what a factory may use besides the sink's own options.
type Deps struct {
	Instance string         // instance name, for sinks that stamp it on messages
	Log      zerolog.Logger // the instance's logger
}

// Factory builds one sink from its config entry. It validates the options and returns *OptionError values
// (joined when several options are wrong) that never echo an option's value.
type Factory func(spec config.SinkSpec, deps Deps) (Sink, error)

// Registry maps sink types to factories. It is a value owned by one instance (no package-level map), safe for
// concurrent use.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
}

// NewRegistry returns an empty registry. The registry holding the shipped sinks is built by package
// sinks/builtin, which can import the sink packages (they import this one).
func NewRegistry() *Registry { return &Registry{factories: make(map[string]Factory)} }

// Register binds typ to f, replacing any earlier factory for typ.
func (r *Registry) Register(typ string, f Factory) {
	if f == nil {
		panic("sinks: Register with a nil factory for " + typ) // a programming error at wiring time
	}
	r.mu.Lock()
	r.factories[typ] = f
	r.mu.Unlock()
}

// Types lists the registered sink types, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.factories))
	for t := range r.factories {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// New builds the sink for spec. An unregistered type is an error naming it (and matching ErrUnknownType).
func (r *Registry) New(spec config.SinkSpec, deps Deps) (Sink, error) {
	r.mu.RLock()
	f, ok := r.factories[spec.Type]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %s)", ErrUnknownType, spec.Type, strings.Join(r.Types(), ", "))
	}
	s, err := f(spec, deps)
	if err != nil {
		return nil, fmt.Errorf("cannot build %s sink: %w", spec.Type, err)
	}
	if s == nil {
		return nil, fmt.Errorf("cannot build %s sink: factory returned no sink", spec.Type)
	}
	return s, nil
}
