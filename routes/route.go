package routes

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Spec is a route as written: in routes.seed and in the admin API's bodies.
type Spec struct {
	// ID is a lowercase slug: [a-z0-9][a-z0-9_-]{0,63}.
	ID   string `json:"id" yaml:"id"`
	Path string `json:"path" yaml:"path"`
	// Methods default to [POST]; each one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS.
	Methods []string `json:"methods,omitempty" yaml:"methods"`
	// Enabled defaults to true; a disabled route matches nothing and holds no path.
	Enabled *bool `json:"enabled,omitempty" yaml:"enabled"`
	// Tenant, when set, is the tenant the route belongs to: only principals that see it see the route, and a
	// tenant erase removes it. Unset, the route is the node's (principals of every tenant only).
	Tenant string `json:"tenant,omitempty" yaml:"tenant"`
	// IPRules are the route's own rules, checked after the global ones (nil: none).
	IPRules  *RulesSpec        `json:"ip_rules,omitempty" yaml:"ip_rules"`
	Metadata map[string]string `json:"metadata,omitempty" yaml:"metadata"`
}

// Route is a validated route with its stored bookkeeping.
type Route struct {
	ID, Path, Tenant string
	Methods          []string // canonical: upper case, sorted, unique
	Enabled          bool
	IPRules          *RulesSpec // canonical; nil: none
	Metadata         map[string]string
	// InsertedAt and UpdatedAt are unix milliseconds; Revision is the route's audit revision.
	InsertedAt, UpdatedAt int64
	Revision              uint64

	pattern Pattern
	methods methodSet
	rules   *Rules // nil: none
}

// Methods a route may list, in their bit order.
var methodNames = [...]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

type methodSet uint8

// methodBit maps a request method to its bit (0: a method no route may list).
func methodBit(m []byte) methodSet {
	for i, n := range methodNames {
		if string(m) == n {
			return 1 << i
		}
	}
	return 0
}

// Limits of a spec's free-form parts.
const (
	maxIDLen       = 64
	maxMetadata    = 32
	maxMetadataKey = 64
	maxMetadataVal = 512
)

// ParseSpec validates a spec and returns its route (no timestamps, revision 0). The error is a *FieldError.
func ParseSpec(s Spec) (*Route, error) {
	if !ValidID(s.ID) {
		return nil, fieldErr("id", "must be a lowercase slug [a-z0-9][a-z0-9_-]{0,63}")
	}
	p, err := ParsePattern(s.Path)
	if err != nil {
		return nil, err
	}
	r := &Route{ID: s.ID, Path: s.Path, Tenant: s.Tenant, Enabled: true, pattern: p}
	if s.Enabled != nil {
		r.Enabled = *s.Enabled
	}
	if s.Tenant != "" && !validTenant(s.Tenant) {
		return nil, fieldErr("tenant", "must match [A-Za-z0-9_-]{1,64}")
	}
	methods := s.Methods
	if len(methods) == 0 {
		methods = []string{"POST"}
	}
	for i, m := range methods {
		bit := methodBit([]byte(m))
		if bit == 0 {
			return nil, fieldErr("methods["+strconv.Itoa(i)+"]", "must be one of GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS")
		}
		r.methods |= bit
	}
	for i, n := range methodNames {
		if r.methods&(1<<i) != 0 {
			r.Methods = append(r.Methods, n)
		}
	}
	if s.IPRules != nil {
		rules, canon, err := ParseRules(*s.IPRules)
		if err != nil {
			return nil, within("ip_rules", err)
		}
		r.rules, r.IPRules = &rules, &canon
	}
	if len(s.Metadata) > maxMetadata {
		return nil, fieldErr("metadata", "must hold at most %d keys", maxMetadata)
	}
	for k, v := range s.Metadata {
		if k == "" || len(k) > maxMetadataKey || !printable(k) {
			return nil, fieldErr("metadata", "must have keys of 1 to %d printable bytes", maxMetadataKey)
		}
		if len(v) > maxMetadataVal || !printable(v) {
			return nil, fieldErr("metadata", "must have values of at most %d printable bytes", maxMetadataVal)
		}
	}
	if len(s.Metadata) > 0 {
		r.Metadata = make(map[string]string, len(s.Metadata))
		for k, v := range s.Metadata {
			r.Metadata[k] = v
		}
	}
	return r, nil
}

// Spec is the route's canonical spec: what an audit row hashes and a no-op is told by.
func (r *Route) Spec() Spec {
	en := r.Enabled
	return Spec{ID: r.ID, Path: r.Path, Methods: slices.Clone(r.Methods), Enabled: &en, Tenant: r.Tenant,
		IPRules: r.IPRules, Metadata: r.Metadata}
}

// CanonicalSpec is the canonical spec's JSON (map keys sorted by encoding/json).
func (r *Route) CanonicalSpec() []byte {
	b, _ := json.Marshal(r.Spec()) // strings, bools and maps of strings always encode
	return b
}

// Pattern is the route's parsed path.
func (r *Route) Pattern() Pattern { return r.pattern }

// ValidID reports whether s is a route id: a lowercase slug [a-z0-9][a-z0-9_-]{0,63}.
func ValidID(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '_') {
			return false
		}
	}
	return true
}

func validTenant(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// View is a route's public form: the admin API's resource and a lifecycle event's data. It holds no secret.
type View struct {
	ID         string            `json:"id"`
	Path       string            `json:"path"`
	Methods    []string          `json:"methods"`
	Enabled    bool              `json:"enabled"`
	Tenant     string            `json:"tenant,omitempty"`
	IPRules    *RulesSpec        `json:"ip_rules"`
	Metadata   map[string]string `json:"metadata"`
	InsertedAt string            `json:"inserted_at"` // RFC 3339, UTC, milliseconds
	UpdatedAt  string            `json:"updated_at"`
	Revision   uint64            `json:"revision"`
}

// View returns the route's public form.
func (r *Route) View() View {
	md := r.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return View{ID: r.ID, Path: r.Path, Methods: r.Methods, Enabled: r.Enabled, Tenant: r.Tenant, IPRules: r.IPRules,
		Metadata: md, InsertedAt: stamp(r.InsertedAt), UpdatedAt: stamp(r.UpdatedAt), Revision: r.Revision}
}

func stamp(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
