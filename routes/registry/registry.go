// Package registry keeps the node's routes (routes.store.type local): each change is checked against the
// published table (ids, max_routes, path+method conflicts), committed to this node's store in one synced
// batch with its audit row (flagged for lifecycle publication), and only then published to the edge's table
// as a new snapshot. Its invariant: the published table is what the store holds, and a change the store did
// not take is never published.
package registry

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/routes"
	"github.com/ankusa-go/ankusa/store"
)

var (
	// ErrNotFound is a route that does not exist, or one of a tenant the caller does not see (404).
	ErrNotFound = errors.New("registry: no such route")
	// ErrExists refuses a create whose id is taken (409).
	ErrExists = errors.New("registry: the route id is taken")
	// ErrLimit refuses a create past routes.max_routes (409).
	ErrLimit = errors.New("registry: routes.max_routes reached")
	// ErrForbidden refuses a route of a tenant the caller does not see, or a node route (no tenant) for a
	// caller that does not see every tenant (403).
	ErrForbidden = errors.New("registry: the caller may not own a route of that tenant")
	// ErrUnavailable is a store that is closed, or a node that keeps none (wal.type none): routes are then the
	// file's seed only (503 or 409).
	ErrUnavailable = errors.New("registry: the route store is unavailable")
)

// Options build a Registry.
type Options struct {
	DB    func() *store.DB // nil while closed; a nil func: no store at all (wal.type none)
	Table *routes.Table
	Max   int // routes.max_routes
	// Lifecycle flags route changes for publication (lifecycle.sinks set).
	Lifecycle bool
	IPRules   routes.RulesSpec // routes.ip_rules
	Proxies   routes.Proxies   // routes.trusted_proxies
	Seed      []routes.Spec    // routes.seed
	// Changed is told the table's size after every publication (the ankusa_routes gauge).
	Changed func(size int)
	Log     zerolog.Logger
}

// Registry is the node's route store and the writer of its table.
type Registry struct {
	o Options
	// mu serializes changes: each one is checked against, and builds on, the snapshot the last one published.
	mu sync.Mutex
}

// New returns the registry; Load fills the table.
func New(o Options) *Registry {
	if o.Changed == nil {
		o.Changed = func(int) {}
	}
	return &Registry{o: o}
}

// Change is who makes a change (its audit entry) and which tenants they see (nil: every tenant).
type Change struct {
	Audit store.AuditEntry
	Sees  func(tenant string) bool
}

func (c Change) sees(tenant string) bool { return c.Sees == nil || c.Sees(tenant) }

// Snapshot is the published table.
func (g *Registry) Snapshot() *routes.Snapshot { return g.o.Table.Load() }

// stored is a route's value in the store.
type stored struct {
	Spec       routes.Spec `json:"spec"`
	InsertedAt int64       `json:"inserted_at"`
	UpdatedAt  int64       `json:"updated_at"`
	Revision   uint64      `json:"revision"`
}

func decode(v []byte) (*routes.Route, error) {
	var s stored
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, err
	}
	r, err := routes.ParseSpec(s.Spec)
	if err != nil {
		return nil, err
	}
	r.InsertedAt, r.UpdatedAt, r.Revision = s.InsertedAt, s.UpdatedAt, s.Revision
	return r, nil
}

func (g *Registry) db() *store.DB {
	if g.o.DB == nil {
		return nil
	}
	return g.o.DB()
}

// Load reads the stored routes and global rules, creates every routes.seed entry whose id the store does not
// hold (audited as "system"), and publishes the table. Without a store the table is the seed alone. A
// stored route the node can no longer parse, or a seed that conflicts with a stored route, is skipped with
// an error in the log: it never hides the rest.
func (g *Registry) Load() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var list []*routes.Route
	global := g.o.IPRules
	db := g.db()
	if g.o.DB != nil && db == nil {
		return ErrUnavailable
	}
	if db != nil {
		rows, err := db.ListRoutes()
		if err != nil {
			return fmt.Errorf("cannot load the routes: %w", err)
		}
		for _, row := range rows {
			r, err := decode(row.Value)
			if err != nil {
				g.o.Log.Error().Err(err).Str("route", row.ID).Msg("stored route skipped: it no longer parses")
				continue
			}
			list = append(list, r)
		}
		v, err := db.RouteIPRules()
		if err != nil {
			return err
		}
		if v != nil {
			if err := json.Unmarshal(v, &global); err != nil {
				return fmt.Errorf("stored global IP rules: %w", err)
			}
		}
	}
	snap, err := routes.Build(list, global, g.o.Proxies)
	if err != nil {
		return fmt.Errorf("cannot build the route table: %w", err)
	}
	g.publish(snap)
	now := time.Now().UnixMilli()
	for _, s := range g.o.Seed {
		if g.Snapshot().Get(s.ID) != nil {
			continue
		}
		r, err := routes.ParseSpec(s)
		if err != nil {
			g.o.Log.Error().Err(err).Str("route", s.ID).Msg("routes.seed entry skipped")
			continue
		}
		r.InsertedAt, r.UpdatedAt = now, now
		if db == nil {
			snap, err := routes.Build(append(g.Snapshot().List(), r), global, g.o.Proxies)
			if err != nil {
				g.o.Log.Error().Err(err).Str("route", s.ID).Msg("routes.seed entry skipped")
				continue
			}
			g.publish(snap)
			continue
		}
		c := Change{Audit: store.AuditEntry{Actor: "system", RequestID: "routes.seed"}}
		if _, _, err := g.commitLocked(c, nil, r); err != nil {
			g.o.Log.Error().Err(err).Str("route", s.ID).Msg("routes.seed entry not created")
		}
	}
	return nil
}

// Reload re-reads the store (a tenant erase removed routes under the table).
func (g *Registry) Reload() error {
	if g.o.DB == nil {
		return nil
	}
	g.mu.Lock()
	db := g.db()
	if db == nil {
		g.mu.Unlock()
		return ErrUnavailable
	}
	rows, err := db.ListRoutes()
	if err != nil {
		g.mu.Unlock()
		return err
	}
	var list []*routes.Route
	for _, row := range rows {
		if r, err := decode(row.Value); err == nil {
			list = append(list, r)
		}
	}
	cur := g.Snapshot()
	snap, err := routes.Build(list, cur.Global(), g.o.Proxies)
	if err == nil {
		g.publish(snap)
	}
	g.mu.Unlock()
	return err
}

func (g *Registry) publish(s *routes.Snapshot) {
	g.o.Table.Publish(s)
	g.o.Changed(s.Len())
}

// Get returns route id when c sees it (ErrNotFound otherwise).
func (g *Registry) Get(c Change, id string) (*routes.Route, error) {
	r := g.Snapshot().Get(id)
	if r == nil || !c.sees(r.Tenant) {
		return nil, ErrNotFound
	}
	return r, nil
}

// Create adds a route; ErrExists when its id is taken.
func (g *Registry) Create(c Change, s routes.Spec) (*routes.Route, store.AuditRow, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev := g.Snapshot().Get(s.ID); prev != nil {
		if !c.sees(prev.Tenant) {
			return nil, store.AuditRow{}, ErrExists // the id is taken, whoever holds it
		}
		return prev, store.AuditRow{}, ErrExists
	}
	return g.putLocked(c, nil, s)
}

// Put creates or replaces route s.ID; created reports which.
func (g *Registry) Put(c Change, s routes.Spec) (r *routes.Route, created bool, row store.AuditRow, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.Snapshot().Get(s.ID)
	if prev != nil && !c.sees(prev.Tenant) {
		return nil, false, store.AuditRow{}, ErrExists
	}
	r, row, err = g.putLocked(c, prev, s)
	return r, prev == nil, row, err
}

// Update applies mutate to route id's spec (id and path are the caller's to keep); ErrNotFound when absent.
func (g *Registry) Update(c Change, id string, mutate func(*routes.Spec) error) (*routes.Route, store.AuditRow, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.Snapshot().Get(id)
	if prev == nil || !c.sees(prev.Tenant) {
		return nil, store.AuditRow{}, ErrNotFound
	}
	s := prev.Spec()
	if err := mutate(&s); err != nil {
		return nil, store.AuditRow{}, err
	}
	return g.putLocked(c, prev, s)
}

// Delete removes route id; ErrNotFound when absent.
func (g *Registry) Delete(c Change, id string) (store.AuditRow, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.Snapshot().Get(id)
	if prev == nil || !c.sees(prev.Tenant) {
		return store.AuditRow{}, ErrNotFound
	}
	_, row, err := g.commitLocked(c, prev, nil)
	return row, err
}

// putLocked validates s and commits it over prev (nil: a create). Held: mu.
func (g *Registry) putLocked(c Change, prev *routes.Route, s routes.Spec) (*routes.Route, store.AuditRow, error) {
	r, err := routes.ParseSpec(s)
	if err != nil {
		return nil, store.AuditRow{}, err
	}
	if !c.sees(r.Tenant) {
		return nil, store.AuditRow{}, ErrForbidden
	}
	now := time.Now().UnixMilli()
	r.InsertedAt, r.UpdatedAt = now, now
	if prev != nil {
		r.InsertedAt = prev.InsertedAt
	}
	return g.commitLocked(c, prev, r)
}

// commitLocked replaces prev by next (either nil: a create or a delete): the new table is built first (a
// conflict or the limit refuses the change before anything is written), the change commits with its audit
// row, then the table is published. A change that changes nothing is store.ErrNoChange with prev. Held: mu.
func (g *Registry) commitLocked(c Change, prev, next *routes.Route) (*routes.Route, store.AuditRow, error) {
	cur := g.Snapshot()
	id := ""
	list := make([]*routes.Route, 0, cur.Len()+1)
	if next != nil {
		id = next.ID
	} else {
		id = prev.ID
	}
	for _, r := range cur.List() {
		if r.ID != id {
			list = append(list, r)
		}
	}
	if next != nil {
		if prev == nil && cur.Len() >= g.o.Max {
			return nil, store.AuditRow{}, ErrLimit
		}
		list = append(list, next)
	}
	snap, err := routes.Build(list, cur.Global(), g.o.Proxies)
	if err != nil {
		return nil, store.AuditRow{}, err
	}
	db := g.db()
	if db == nil {
		return nil, store.AuditRow{}, ErrUnavailable
	}
	subject := Subject(id)
	row, err := db.Audited(func(get store.AuditReader) (store.AuditEntry, []store.AuditOp, error) {
		e := c.Audit
		e.Subject = subject
		var before *routes.Route
		if v, err := get(store.RouteKey(id)); err != nil {
			return e, nil, err
		} else if v != nil {
			if before, err = decode(v); err != nil {
				return e, nil, fmt.Errorf("stored route %s: %w", id, err)
			}
			e.Before = before.CanonicalSpec()
		}
		var ops []store.AuditOp
		if before != nil && before.Tenant != "" && (next == nil || next.Tenant != before.Tenant) {
			ops = append(ops, store.AuditOp{Key: store.RouteTenantKey(before.Tenant, id), Delete: true})
		}
		if next == nil {
			if before == nil {
				return e, nil, ErrNotFound
			}
			e.Action, e.Tenant = "route.delete", before.Tenant
			ops = append(ops, store.AuditOp{Key: store.RouteKey(id), Delete: true})
			e.Entity = entity(before)
		} else {
			e.Action, e.Tenant = "route.update", next.Tenant
			if before == nil {
				e.Action = "route.create"
			}
			e.After = next.CanonicalSpec()
			v, err := get(store.RevisionKey(subject))
			if err != nil {
				return e, nil, err
			}
			next.Revision = 1
			if len(v) == 8 {
				next.Revision = binary.BigEndian.Uint64(v) + 1
			}
			val, err := json.Marshal(stored{Spec: next.Spec(), InsertedAt: next.InsertedAt, UpdatedAt: next.UpdatedAt,
				Revision: next.Revision})
			if err != nil {
				return e, nil, err
			}
			ops = append(ops, store.AuditOp{Key: store.RouteKey(id), Value: val})
			if next.Tenant != "" {
				ops = append(ops, store.AuditOp{Key: store.RouteTenantKey(next.Tenant, id), Value: []byte{}})
			}
			e.Entity = entity(next)
		}
		e.Lifecycle = g.o.Lifecycle
		if !e.Lifecycle {
			e.Entity = nil
		}
		return e, ops, nil
	})
	if errors.Is(err, store.ErrNoChange) {
		return prev, store.AuditRow{}, err
	}
	if err != nil {
		return nil, store.AuditRow{}, err
	}
	g.publish(snap)
	return next, row, nil
}

// SetIPRules replaces the global IP rules (persisted: they win over routes.ip_rules from then on). The same
// rules again are store.ErrNoChange with no row.
func (g *Registry) SetIPRules(c Change, s routes.RulesSpec) (routes.RulesSpec, store.AuditRow, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, canon, err := routes.ParseRules(s)
	if err != nil {
		return routes.RulesSpec{}, store.AuditRow{}, err
	}
	cur := g.Snapshot()
	snap, err := routes.Build(cur.List(), canon, g.o.Proxies)
	if err != nil {
		return routes.RulesSpec{}, store.AuditRow{}, err
	}
	db := g.db()
	if db == nil {
		return routes.RulesSpec{}, store.AuditRow{}, ErrUnavailable
	}
	before, _ := json.Marshal(cur.Global())
	after, _ := json.Marshal(canon)
	e := c.Audit
	e.Action, e.Subject, e.Before, e.After = "ip_rules.update", "ip_rules", before, after
	row, err := db.CommitAudited(e, store.AuditOp{Key: store.RouteIPRulesKey(), Value: after})
	if err != nil {
		return cur.Global(), store.AuditRow{}, err
	}
	g.publish(snap)
	return canon, row, nil
}

// Subject is the audit subject of route id.
func Subject(id string) string { return "route:" + id }

// entity is the lifecycle event's data: the route's public form.
func entity(r *routes.Route) []byte {
	b, _ := json.Marshal(r.View())
	return b
}
