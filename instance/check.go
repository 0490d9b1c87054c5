package instance

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/builtin"
)

// builtRoles are the roles this build runs (storage: the archive compactor; claim_check: the
// claim gateway and its retention sweep, which only read and expire what check-ins wrote).
var builtRoles = []string{config.RoleClaimCheck, config.RoleDispatch, config.RoleEdge, config.RoleStorage}

// Check reports every part of cfg that this build cannot run, each with its key path: a
// wal.type other than disk, dual or none, a role nothing here builds, a sink type no sink package
// registers, sink options the sink refuses, sources the edge cannot compile. New refuses
// with it (so serve does) and check-config calls it, so the two never disagree. Under
// wal.type none every source needs a sink whose Durable() is true. The error
// matches both config.ErrInvalid (exit 78) and ErrUnsupported.
func Check(cfg *config.Config) error {
	var ps []config.Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, config.Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if !slices.Contains([]string{config.WALDisk, config.WALDual, config.WALNone}, cfg.WAL.Type) {
		add("wal.type", "this build runs disk, dual and none, got %q", cfg.WAL.Type)
	}
	for i, r := range cfg.Node.Roles {
		if !slices.Contains(builtRoles, r) {
			add(fmt.Sprintf("node.roles[%d]", i), "this build does not run role %s (it runs %s)", r, strings.Join(builtRoles, ", "))
		}
	}
	for n, spec := range cfg.Lifecycle.Sinks {
		s, err := builtin.NewRegistry().New(spec, sinks.Deps{Instance: cfg.Instance, Log: zerolog.Nop()})
		if err != nil {
			add(fmt.Sprintf("lifecycle.sinks[%d]", n), "%v", err) // sink option errors never echo a value
			continue
		}
		_ = s.Close()
	}
	// Every sink is built here whatever this node's roles: a hook an edge-only node stores
	// for a sink that no node of this build can deliver would never leave the store.
	reg := builtin.NewRegistry()
	ids := make([]string, 0, len(cfg.Sources))
	for id := range cfg.Sources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		durable, built := false, true
		for i, spec := range cfg.Sources[id].Sinks {
			path := fmt.Sprintf("sources.%s.sinks[%d]", id, i)
			s, err := reg.New(spec, sinks.Deps{Instance: cfg.Instance, Log: zerolog.Nop()})
			switch {
			case errors.Is(err, sinks.ErrUnknownType):
				built = false
				add(path+".type", "this build has no %s sink (it has %s)", spec.Type, strings.Join(reg.Types(), ", "))
			case err != nil:
				built = false
				add(path, "%v", err) // sink option errors never echo a value
			default:
				durable = durable || s.Durable()
				_ = s.Close()
			}
		}
		if cfg.WAL.Type == config.WALNone && built && !durable {
			// Design: "boot refuses a wal: :none config in which no sink of a static source can
			// make it" (Ankusa.Sink.durable?/1, inventory D.6).
			add("sources."+id+".sinks", "wal.type none needs a durable sink, and no sink of source %s keeps what it confirms", id)
		}
	}
	if _, err := edge.NewStaticSources(cfg.Sources); err != nil {
		add("sources", "%v", err)
	}
	if len(ps) == 0 {
		return nil
	}
	sort.SliceStable(ps, func(a, b int) bool { return ps[a].Path < ps[b].Path })
	return fmt.Errorf("%w: %w", ErrUnsupported, &config.Error{Problems: ps})
}
