package edge

import (
	"hash/maphash"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/fleet"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/verify"
)

// Settings are the edge's knobs, read from the config once.
type Settings struct {
	Instance      string
	IP            string
	Port          int
	MaxBodyBytes  int64
	MaxConns      int
	MaxConnsPerIP int
	// MaxReadingBytes and MaxReadingBytesPerIP bound the body bytes held by unanswered
	// requests, node-wide and per client address.
	MaxReadingBytes      int64
	MaxReadingBytesPerIP int64
	HeaderTimeout        time.Duration
	ReadTimeout          time.Duration
	IdleTimeout          time.Duration
	// WrapListener, when set, wraps the bound ingest socket (tests inject accept faults).
	WrapListener   func(net.Listener) net.Listener
	Partitions     int
	MaxBatch       int
	MaxDelay       time.Duration
	MaxQueue       int64
	MaxQueueBytes  int64
	MaxCommits     int
	RecordDeadline time.Duration
	TLS            config.TLS
	RateLimits     config.RateLimits
	Quarantine     config.Quarantine
	// FleetRates and FleetDedupe count the tenant quota and the provider event keys in the fleet store
	// (rate_limits.scope, dedupe.scope fleet); PendingTTL is how long a pending claim outlives its node.
	FleetRates  bool
	FleetDedupe bool
	PendingTTL  time.Duration
	// URLTenants bounds the tenants tenant_path URLs mint for shared sources (route.go).
	URLTenants URLTenantSettings
	// Archive asks each commit for an archive obligation. It is set only once a
	// compactor runs to clear them: an obligation nothing clears would keep every hook
	// forever.
	Archive bool
}

// SettingsFrom reads the edge's settings from cfg.
func SettingsFrom(cfg *config.Config) Settings {
	b := cfg.Batcher
	return Settings{
		Instance:             cfg.Instance,
		IP:                   cfg.HTTP.IP,
		Port:                 cfg.HTTP.Port,
		MaxBodyBytes:         cfg.HTTP.MaxBodyBytes,
		MaxConns:             cfg.HTTP.MaxConns,
		MaxReadingBytes:      cfg.HTTP.MaxReadingBytes,
		MaxReadingBytesPerIP: cfg.HTTP.MaxReadingBytesPerIP,
		MaxConnsPerIP:        cfg.HTTP.MaxConnsPerIP,
		HeaderTimeout:        time.Duration(cfg.HTTP.HeaderTimeoutMS) * time.Millisecond,
		ReadTimeout:          time.Duration(cfg.HTTP.ReadTimeoutMS) * time.Millisecond,
		IdleTimeout:          time.Duration(cfg.HTTP.IdleTimeoutMS) * time.Millisecond,
		Partitions:           b.Partitions,
		MaxBatch:             b.MaxBatch,
		MaxDelay:             time.Duration(b.MaxDelayMS) * time.Millisecond,
		MaxQueue:             int64(b.MaxQueue),
		MaxQueueBytes:        b.MaxQueueBytes,
		MaxCommits:           b.MaxCommits,
		RecordDeadline:       time.Duration(b.RecordDeadlineMS) * time.Millisecond,
		TLS:                  cfg.HTTP.TLS,
		RateLimits:           cfg.RateLimits,
		Quarantine:           cfg.Quarantine,
		URLTenants:           urlTenantSettingsFrom(cfg),
		FleetRates:           cfg.RateLimits.Scope == config.ScopeFleet,
		FleetDedupe:          cfg.Dedupe.Scope == config.ScopeFleet,
		PendingTTL:           time.Duration(b.RecordDeadlineMS)*time.Millisecond + 5*time.Second,
		// The instance sets Archive when the storage role runs its compactor.
		Archive: false,
	}
}

// Health is the readiness state the ingest and admin listeners report.
type Health struct {
	draining     atomic.Bool
	notAccepting atomic.Bool
	storeHealth  // the store's part (storehealth.go)
	// sinks is the publisher whose sinks /ready watches (wal.type none); nil otherwise.
	sinks atomic.Pointer[Publisher]
	// backupFresh, when set (backup.require_fresh), reports whether the last backup is recent enough.
	backupFresh atomic.Pointer[func(time.Time) bool]
	// intake, when set (wal.type dual), makes /ready 503 while recovery runs or the breaker is open.
	intake atomic.Pointer[IntakeState]
}

// RequireFreshBackup makes /ready 503 backup_stale while fresh(now) is false.
func (h *Health) RequireFreshBackup(fresh func(now time.Time) bool) { h.backupFresh.Store(&fresh) }

// SetDraining flips /ready to 503 draining.
func (h *Health) SetDraining() { h.draining.Store(true) }

// Draining reports whether SetDraining was called.
func (h *Health) Draining() bool { return h.draining.Load() }

// SetAccepting records whether the ingest listener can accept connections: false while
// accepts fail (out of file descriptors) or its serve loop has ended and is restarting.
func (h *Health) SetAccepting(ok bool) {
	if h.notAccepting.Load() == ok {
		h.notAccepting.Store(!ok)
	}
}

// Ready reports readiness and, when not ready, the reason and the store check's value.
func (h *Health) Ready(now time.Time) (ok bool, status, store string) {
	switch {
	case h.draining.Load():
		return false, "draining", "ok"
	case h.storeNotReady() != "":
		return false, "unavailable", h.storeNotReady()
	case h.notAccepting.Load():
		return false, "not_accepting", "ok"
	}
	if r := h.intakeNotReady(); r != "" {
		return false, r, "ok"
	}
	if p := h.sinks.Load(); p != nil && p.anyFailing(now) {
		return false, "unavailable", "ok"
	}
	if f := h.backupFresh.Load(); f != nil && !(*f)(now) {
		return false, "backup_stale", "ok"
	}
	return true, "ready", "ok"
}

// Sinks is the sinks check of /ready: watched is false when no sink is watched (wal.type
// disk); failing names the sinks whose last publish failed within
// health.sink_error_window_ms.
func (h *Health) Sinks(now time.Time) (watched bool, failing []FailingSink) {
	p := h.sinks.Load()
	if p == nil {
		return false, nil
	}
	return true, p.FailingSinks(now)
}

// Edge is one instance's ingest state, shared by the listener's handler and the
// batchers. Everything here is instance-scoped.
type Edge struct {
	set      Settings
	log      zerolog.Logger
	tel      *telemetry.Telemetry
	resolver RouteResolver
	sources  SourceStore
	health   *Health
	system   *actor.ActorSystem
	limits   *limits
	budget   *readBudget
	pen      pen
	db       func() *store.DB // the open store, for the dedupe fast path
	tenants  *urlTenantGate   // the tenants tenant_path URLs minted (route.go)

	// direct publishes to the sinks under wal.type none; nil under disk, where the
	// batchers commit.
	direct *Publisher
	// closed holds the tenants being erased (copy on write; nil when none): their hooks are 503 tenant_erasing.
	closed   atomic.Pointer[map[string]struct{}]
	closedMu sync.Mutex
	// guard is the route guard (routes.enabled, routeguard.go); nil when off.
	guard *routeGuard
	// fleet is the fleet store under rate_limits.scope or dedupe.scope fleet; nil otherwise (fleet.go).
	fleet *fleet.Store
	// intake is the intake log under wal.type dual (intake.go); nil otherwise.
	intake           IntakeState
	intakeRetryAfter int

	batchers []*actor.PID
	parts    []partition
	seed     maphash.Seed
	scratch  sync.Pool

	addr   atomic.Pointer[string]
	outage atomic.Pointer[outage] // fired when the writer or a batcher crashes (outage.go)
	sock   socketKeeper           // the ingest socket between listener restarts (socket.go)
}

// New builds the edge of one instance. Batchers are addressed by name, so a respawned
// batcher is reached without telling the handler.
func New(set Settings, system *actor.ActorSystem, resolver RouteResolver, sources SourceStore,
	tel *telemetry.Telemetry, health *Health) *Edge {
	e := &Edge{
		set: set, log: tel.Log.With().Str("component", "edge").Logger(), tel: tel,
		resolver: resolver, sources: sources, health: health, system: system,
		parts: make([]partition, set.Partitions), seed: maphash.MakeSeed(),
		limits:  newLimits(set.RateLimits, set.Quarantine),
		db:      func() *store.DB { return nil },
		tenants: newURLTenantGate(set.URLTenants),
		budget:  newReadBudget(set.MaxReadingBytes, set.MaxReadingBytesPerIP, tel),
	}
	for i := range set.Partitions {
		e.batchers = append(e.batchers, actor.NewPID(system.Address(), BatcherName(set.Instance, i)))
	}
	e.scratch.New = func() any { return newScratch() }
	e.outage.Store(newOutage())
	return e
}

// SetPublisher switches the commit step to a direct publish (wal.type none) and makes
// /ready watch p's sinks. It is called before the listener starts.
func (e *Edge) SetPublisher(p *Publisher) {
	e.direct = p
	e.health.sinks.Store(p)
}

// SetStore tells the edge how to reach the open store (nil while it is closed).
func (e *Edge) SetStore(db func() *store.DB) { e.db = db }

// CloseSocket stops keeping the ingest socket across listener restarts: the listener's
// next stop closes it, and a socket parked now is closed at once. The instance calls it
// before it stops the tree, so a drained node refuses connections once its listener stops.
func (e *Edge) CloseSocket() { e.sock.close() }

// Addr is the ingest listener's bound address ("" before it listens).
func (e *Edge) Addr() string {
	if p := e.addr.Load(); p != nil {
		return *p
	}
	return ""
}

// Queue reports the records and body bytes held by every partition (gauges).
func (e *Edge) Queue() (records, bytes int64) {
	for i := range e.parts {
		records += e.parts[i].records.Load()
		bytes += e.parts[i].bytes.Load()
	}
	return records, bytes
}

// The edge subtree's names; the PID id of a child is its full name.
const (
	SubtreeName  = "edge"
	WriterName   = "writer"
	ListenerName = "listener"
)

// WriterPID is the writer's id under the edge subtree of instance.
func WriterPID(system *actor.ActorSystem, instance string) *actor.PID {
	return actor.NewPID(system.Address(), instance+"/"+SubtreeName+"/"+WriterName)
}

// BatcherName is the full name of partition i's batcher.
func BatcherName(instance string, i int) string {
	return instance + "/" + SubtreeName + "/" + BatcherChild(i)
}

// BatcherChild is partition i's batcher name under the edge subtree.
func BatcherChild(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return "batcher-" + digits[i:i+1]
	}
	return "batcher-" + digits[i/10:i/10+1] + digits[i%10:i%10+1]
}

// headerOnly is a header's value from the request head. fasthttp's Peek falls back to
// a chunked body's trailer section, which is never validated or stored: a value found
// only there is not a header, for verification and dedupe alike.
func headerOnly(h *fasthttp.RequestHeader, name string) []byte {
	v := h.Peek(name)
	if len(v) == 0 {
		return v
	}
	if t := h.PeekTrailer(name); len(t) > 0 && &t[0] == &v[0] {
		return nil
	}
	return v
}

// scratch is one request's reusable memory.
type scratch struct {
	ctx    *fasthttp.RequestCtx
	header func(string) []byte // header lookup for verifiers and dedupe, bound to ctx once
	query  func(string) []byte
	hashed []byte // store_headers hash output
	body   []byte
	arena  []byte
	spans  []span
	hdrs   []store.Header
	timer  *time.Timer
	resp   []byte
	vreq   verify.Request // verifyTrust's request
	// pending is the record of the scratch's last commit, kept for the next one with its Done channel and its
	// value buffer (the encoded hook, body included: without it every hook allocated its body again, which at
	// 10 KiB bodies was nearly half of the node's allocated bytes and as much of its collections).
	pending *store.Pending
}

// takePending returns the scratch's record, reset, or a new one.
func (sc *scratch) takePending() *store.Pending {
	p := sc.pending
	if p == nil {
		return store.NewPending()
	}
	sc.pending = nil
	p.Reset()
	return p
}

// keepPending keeps p for the scratch's next commit if the writer is done with it: it answered it (Started; its
// Result was received, the writer never touches a record after answering it). An expired record stays with the
// writer's queue until its batch is done, where the writer may still read it, so it is left to the collector.
func (sc *scratch) keepPending(p *store.Pending) {
	if p.State() == store.Started && len(p.Done) == 0 {
		sc.pending = p
	}
}

func newScratch() *scratch {
	t := time.NewTimer(time.Hour)
	t.Stop()
	sc := &scratch{body: make([]byte, 0, 16<<10), arena: make([]byte, 0, 2<<10), timer: t, resp: make([]byte, 0, 128)}
	sc.header = func(name string) []byte { return headerOnly(&sc.ctx.Request.Header, name) }
	sc.query = func(name string) []byte { return sc.ctx.QueryArgs().Peek(name) }
	return sc
}
