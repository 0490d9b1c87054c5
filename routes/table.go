package routes

import (
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
)

// Reasons of a decision: the bounded values of ankusa_routes_decisions_total{reason}.
const (
	ReasonMatched  = "matched"   // allowed: a route matched and no rule denied
	ReasonNoRoute  = "no_route"  // no enabled route's path matches
	ReasonMethod   = "method"    // a path matched, with another method only
	ReasonIPDenied = "ip_denied" // a global or the route's rule (or default) denied the address
)

// Decision is the guard's verdict on one request.
type Decision struct {
	Allow  bool
	Reason string
	Route  *Route // the matched route; nil when none matched
	// Rule is the rule that decided the address: for a refusal the denying one, for an allowed request the
	// route's when it has rules, else the global one; Scope "" when no rule set has anything to decide.
	Rule RuleHit
}

// RuleHit names a deciding rule. CIDR is "" when the set's default decided.
type RuleHit struct {
	Scope  string `json:"scope"` // "global" | "route"
	Action string `json:"action"`
	CIDR   string `json:"cidr,omitempty"`
}

// Table holds the instance's current snapshot; the edge reads it on every request, writers replace it.
type Table struct{ p atomic.Pointer[Snapshot] }

// NewTable returns a table holding an empty snapshot: every request is no_route until routes are published.
func NewTable() *Table {
	t := &Table{}
	t.p.Store(&Snapshot{byID: map[string]*Route{}})
	return t
}

// Load returns the current snapshot (never nil).
func (t *Table) Load() *Snapshot { return t.p.Load() }

// Publish makes s the current snapshot.
func (t *Table) Publish(s *Snapshot) { t.p.Store(s) }

// Snapshot is an immutable route table: every route by id, the enabled ones in a trie of path segments,
// the global rules and the trusted proxies.
type Snapshot struct {
	root    node
	list    []*Route // by id
	byID    map[string]*Route
	global  Rules
	globalS RulesSpec
	proxies Proxies
}

// node is one path segment's position in the trie. A request segment is tried as a literal first, then as
// a parameter, then the tail takes what is left: the most specific pattern wins, with backtracking.
type node struct {
	lit   map[string]*node
	param *node
	end   *leaf // patterns that end here
	tail  *leaf // patterns whose next segment is "*"
}

// leaf holds the routes of one path shape, by method.
type leaf struct {
	byMethod [len(methodNames)]*Route
	methods  methodSet
}

// Build returns the snapshot of routes (ids unique: ErrDuplicateID), the global rules and the proxies. Two
// enabled routes of one path shape sharing a method are a *ConflictError. Build keeps the route pointers:
// they must not change once published.
func Build(list []*Route, global RulesSpec, proxies Proxies) (*Snapshot, error) {
	g, canon, err := ParseRules(global)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{list: slices.Clone(list), byID: make(map[string]*Route, len(list)), global: g, globalS: canon,
		proxies: proxies}
	slices.SortFunc(s.list, func(a, b *Route) int { return strings.Compare(a.ID, b.ID) })
	for i, r := range s.list {
		if i > 0 && s.list[i-1].ID == r.ID {
			return nil, ErrDuplicateID
		}
		s.byID[r.ID] = r
		if r.Enabled {
			if err := s.root.insert(r); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

func (n *node) insert(r *Route) error {
	at := n
	var lf **leaf
	for i, sg := range r.pattern.segs {
		switch sg.kind {
		case segLiteral:
			if at.lit == nil {
				at.lit = map[string]*node{}
			}
			next := at.lit[sg.lit]
			if next == nil {
				next = &node{}
				at.lit[sg.lit] = next
			}
			at = next
		case segParam:
			if at.param == nil {
				at.param = &node{}
			}
			at = at.param
		case segTail:
			if i != len(r.pattern.segs)-1 {
				panic("routes: a tail segment that is not last passed ParsePattern")
			}
			lf = &at.tail
		}
	}
	if lf == nil {
		lf = &at.end
	}
	if *lf == nil {
		*lf = &leaf{}
	}
	l := *lf
	for i := range methodNames {
		if r.methods&(1<<i) == 0 {
			continue
		}
		if prev := l.byMethod[i]; prev != nil {
			return &ConflictError{A: prev.ID, B: r.ID, Method: methodNames[i]}
		}
		l.byMethod[i] = r
	}
	l.methods |= r.methods
	return nil
}

// Len is the number of routes, enabled or not.
func (s *Snapshot) Len() int { return len(s.list) }

// List returns the routes in id order (shared: do not modify).
func (s *Snapshot) List() []*Route { return s.list }

// Get returns the route of id (nil when none).
func (s *Snapshot) Get(id string) *Route { return s.byID[id] }

// Global is the global rule set, canonical.
func (s *Snapshot) Global() RulesSpec { return s.globalS }

// Proxies are the trusted proxies the snapshot decides with.
func (s *Snapshot) Proxies() Proxies { return s.proxies }

// Decide is the guard's verdict on a request to path (decoded) with method from ip (the client address, see
// ClientIP): the global rules, then the route, then the route's rules. It allocates nothing.
func (s *Snapshot) Decide(method, path []byte, ip netip.Addr) Decision {
	ip = ip.Unmap()
	var d Decision
	if !s.global.empty() {
		ok, i := s.global.decide(ip)
		d.Rule = s.global.hit("global", i)
		if !ok {
			d.Reason = ReasonIPDenied
			return d
		}
	}
	r, pathMatched := s.match(path, methodBit(method))
	if r == nil {
		d.Reason = ReasonNoRoute
		if pathMatched {
			d.Reason = ReasonMethod
		}
		return d
	}
	d.Route = r
	if r.rules != nil {
		ok, i := r.rules.decide(ip)
		d.Rule = r.rules.hit("route", i)
		if !ok {
			d.Reason = ReasonIPDenied
			return d
		}
	}
	d.Allow, d.Reason = true, ReasonMatched
	return d
}

// match finds the route of path and method; pathMatched tells a path some route has (with other methods)
// from one no route has.
func (s *Snapshot) match(path []byte, m methodSet) (*Route, bool) {
	if len(path) == 0 || path[0] != '/' {
		return nil, false
	}
	if len(path) == 1 {
		return s.root.end.pick(m)
	}
	return s.root.walk(path, m)
}

func (l *leaf) pick(m methodSet) (*Route, bool) {
	if l == nil {
		return nil, false
	}
	if l.methods&m == 0 {
		return nil, true
	}
	for i := range l.byMethod {
		if m == 1<<i {
			return l.byMethod[i], true
		}
	}
	return nil, true
}

// walk matches path (starting with "/", or empty once consumed) below n.
func (n *node) walk(path []byte, m methodSet) (*Route, bool) {
	if len(path) == 0 {
		return n.end.pick(m)
	}
	if path[0] != '/' || len(path) < 2 {
		return nil, false // a trailing slash matches nothing
	}
	seg := path[1:]
	rest := path[len(path):]
	for i, c := range seg {
		if c == '/' {
			seg, rest = seg[:i], path[1+i:]
			break
		}
	}
	matched := false
	if len(seg) > 0 {
		if c := n.lit[string(seg)]; c != nil {
			r, pm := c.walk(rest, m)
			if r != nil {
				return r, true
			}
			matched = matched || pm
		}
		if n.param != nil {
			r, pm := n.param.walk(rest, m)
			if r != nil {
				return r, true
			}
			matched = matched || pm
		}
		if n.tail != nil {
			r, pm := n.tail.pick(m)
			if r != nil {
				return r, true
			}
			matched = matched || pm
		}
	}
	return nil, matched
}
