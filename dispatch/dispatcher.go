package dispatch

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// Store is what dispatch needs of the store; *store.DB implements it.
type Store interface {
	Notify() <-chan struct{}
	TenantName(ord uint32) (string, bool)
	ActiveTenants(dst []uint32) []uint32
	Counts() store.Counts
	NextDue(ord uint32) (int64, bool, error)
	OldestDue() (int64, bool, error)
	ClaimDue(ord uint32, now int64, max int, maxBytes int64, dst []store.Claimed) ([]store.Claimed, error)
	SetFresh(fn store.FreshFunc, skip map[string]struct{})
	GrantFresh(decide func(outRows int, outBytes int64) store.FreshGrant)
	GetHook(seq uint64) (store.Hook, error)
	Complete(c *store.Claimed) error
	Reschedule(c *store.Claimed, attempts uint32, at int64, lastErr string) error
	Bury(c *store.Claimed, attempts uint32, reason string, at int64) error
	BeginAttempt()
	EndAttempt()
	RecoverInflight() (int, error)
	LaneBlocks() (map[store.LaneKey]store.LaneBlock, error)
	SetLaneBlock(k store.LaneKey, b store.LaneBlock) error
	ClearLaneBlock(k store.LaneKey) error
	PutReplayJob(j *store.ReplayJob) error
	ReplayJobs() ([]store.ReplayJob, error)
	SteerReplayJob(id [16]byte, state string) (store.ReplayJob, error)
	ReplayDeadStep(j *store.ReplayJob, limit int, now int64) (int, error)
	RedriveArchivedStep(j *store.ReplayJob, recs []*store.Record, cursor store.ArchiveCursor, skipped int, done bool) (int, error)
	ClaimRef(seq uint64) (string, bool, error)
	PutClaimRef(seq uint64, ref string) error
}

// Settings are dispatch's knobs, read from the config once.
type Settings struct {
	Instance         string
	Batch            int
	Concurrency      int
	MaxInflight      int
	MaxInflightBytes int64
	AttemptTimeout   time.Duration
	SinkConcurrency  int
	BreakerFailures  int
	BreakerOpen      time.Duration
	BreakerMaxOpen   time.Duration
	IdleLane         time.Duration
	Tenants          map[string]config.TenantWindow
}

// SettingsFrom reads dispatch's settings from cfg.
func SettingsFrom(cfg *config.Config) Settings {
	d := cfg.Dispatch
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	return Settings{
		Instance: cfg.Instance, Batch: d.Batch, Concurrency: d.Concurrency, MaxInflight: d.MaxInflight,
		MaxInflightBytes: d.MaxInflightBytes, AttemptTimeout: ms(d.AttemptTimeoutMS), SinkConcurrency: d.SinkConcurrency,
		BreakerFailures: d.BreakerFailures, BreakerOpen: ms(d.BreakerOpenMS), BreakerMaxOpen: ms(d.BreakerMaxOpenMS),
		IdleLane: ms(d.IdleLaneMS), Tenants: d.Tenants,
	}
}

// route is what dispatch knows of one configured sink of one source.
type route struct {
	sink    sinks.Sink
	typ     string
	ordered bool
	forward sinks.Forward
	policy  RetryPolicy
}

// Dispatcher is one instance's delivery state shared by the scheduler, its lanes and
// the replayer. Everything here is instance-scoped.
type Dispatcher struct {
	set    Settings
	db     func() Store
	tel    *telemetry.Telemetry
	log    zerolog.Logger
	now    func() time.Time
	routes map[string][]route // source id → its sinks, by index
	// dyn holds the sinks of the API-managed sources (SetSources), swapped whole on every change; sinks it
	// replaced are closed with the dispatcher, as an attempt may still hold one.
	dyn     atomic.Pointer[map[string][]route]
	dynMu   sync.Mutex // serialises SetSources; guards retired
	retired []sinks.Sink
	reg     *sinks.Registry
	deps    sinks.Deps
	retry   config.Retry // dispatch.retry, for an API source without its own
	// claimAt is each source's claim threshold (sinks.ClaimThreshold); a source without one never claims.
	claimAt map[string]int
	claim   sinks.ClaimCheckIn // nil: no claim check (claim.go)
	archive ArchiveReader      // nil: no archive replay (replay.go)

	claimMu  sync.Mutex // guards claiming (used from lane goroutines); a leaf
	claiming map[uint64]*claimCall

	mu   sync.Mutex // guards rand (used from lane goroutines)
	rand *rand.Rand

	// tasks is the running scheduler's group: its wake-ups and every attempt its lanes
	// start. A stopping scheduler stops it, so no lane starts an attempt after that (the
	// row stays claimed, due again at the next start) and the running ones are waited for.
	tasks   atomic.Pointer[task.Group]
	workers atomic.Pointer[workers] // the running scheduler's attempt goroutines, in tasks
	laneSeq atomic.Uint64           // lane actor names
	// wrapLane configures every lane's props (the instance's kill injection under debug.chaos); nil: none.
	wrapLane func(*actor.Props) *actor.Props
}

// WrapLanes has every lane spawned from now on built with wrap(props); call it before the scheduler starts.
func (d *Dispatcher) WrapLanes(wrap func(*actor.Props) *actor.Props) { d.wrapLane = wrap }

// New builds the sinks of every configured source (a sink that cannot be built fails
// here, at boot) and returns the dispatcher. db returns the open store.
func New(cfg *config.Config, db func() Store, reg *sinks.Registry, tel *telemetry.Telemetry) (*Dispatcher, error) {
	d := &Dispatcher{
		set: SettingsFrom(cfg), db: db, tel: tel, log: tel.Log.With().Str("component", "dispatch").Logger(),
		now: time.Now, routes: map[string][]route{}, claimAt: map[string]int{}, claiming: map[uint64]*claimCall{}, rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	deps := sinks.Deps{Instance: cfg.Instance, Log: tel.Log}
	d.reg, d.deps, d.retry = reg, deps, cfg.Dispatch.Retry
	for id, src := range cfg.Sources {
		rs, err := buildRoutes(reg, deps, id, src, cfg.RetryOf(id))
		if err != nil {
			d.Close()
			return nil, err
		}
		d.routes[id] = rs
		ss := make([]sinks.Sink, len(d.routes[id]))
		for i, r := range d.routes[id] {
			ss[i] = r.sink
		}
		if limit, ok := sinks.ClaimThreshold(ss); ok {
			d.claimAt[id] = limit
		}
	}
	return d, nil
}

// buildRoutes builds the sinks of source id (closing those it built when one fails).
func buildRoutes(reg *sinks.Registry, deps sinks.Deps, id string, src config.Source, retry config.Retry) ([]route, error) {
	policy := PolicyFrom(retry)
	var rs []route
	for i, spec := range src.Sinks {
		s, err := reg.New(spec, deps)
		if err != nil {
			for _, r := range rs {
				_ = r.sink.Close()
			}
			return nil, fmt.Errorf("dispatch: source %s sink %d: %w", id, i, err)
		}
		rs = append(rs, route{sink: s, typ: spec.Type, ordered: spec.Ordered,
			forward: sinks.Forward{Allow: src.ForwardHeaders, Proxy: src.ForwardProxyHeaders}, policy: policy})
	}
	return rs, nil
}

// SetSources replaces the sinks of the API-managed sources (keyed by source id), so a changed source's rows
// go to its new sinks without a restart. A sink that cannot be built fails the whole set and keeps the
// previous one.
func (d *Dispatcher) SetSources(srcs map[string]config.Source) error {
	d.dynMu.Lock()
	defer d.dynMu.Unlock()
	next := make(map[string][]route, len(srcs))
	for id, src := range srcs {
		retry := d.retry
		if src.Retry != nil {
			retry = *src.Retry
		}
		rs, err := buildRoutes(d.reg, d.deps, id, src, retry)
		if err != nil {
			for _, built := range next {
				for _, r := range built {
					_ = r.sink.Close()
				}
			}
			return err
		}
		next[id] = rs
	}
	if prev := d.dyn.Swap(&next); prev != nil {
		for _, rs := range *prev {
			for _, r := range rs {
				d.retired = append(d.retired, r.sink)
			}
		}
	}
	return nil
}

// Close closes every sink.
func (d *Dispatcher) Close() {
	for _, rs := range d.routes {
		for _, r := range rs {
			_ = r.sink.Close()
		}
	}
	d.dynMu.Lock()
	defer d.dynMu.Unlock()
	if dyn := d.dyn.Load(); dyn != nil {
		for _, rs := range *dyn {
			for _, r := range rs {
				_ = r.sink.Close()
			}
		}
	}
	for _, s := range d.retired {
		_ = s.Close()
	}
	d.retired = nil
}

// uniform draws from [0, 1) for retry jitter.
func (d *Dispatcher) uniform() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rand.Float64()
}

// sourceKnown tells whether source is one of the node's sources (the file's or the API's).
func (d *Dispatcher) sourceKnown(source string) bool {
	if _, ok := d.routes[source]; ok {
		return true
	}
	if dyn := d.dyn.Load(); dyn != nil {
		_, ok := (*dyn)[source]
		return ok
	}
	return false
}

// route finds the sink a row was bound to; false when the source or the sink is gone.
func (d *Dispatcher) route(source string, index uint16) (route, bool) {
	rs, ok := d.routes[source]
	if !ok {
		if dyn := d.dyn.Load(); dyn != nil {
			rs, ok = (*dyn)[source]
		}
	}
	if !ok || int(index) >= len(rs) {
		return route{}, false
	}
	return rs[index], true
}

// Names under the instance's dispatch subtree.
const (
	SubtreeName   = "dispatch"
	SchedulerName = "scheduler"
	ReplayerName  = "replayer"
)

// SchedulerPID is the scheduler's id under the dispatch subtree of instance.
func SchedulerPID(system *actor.ActorSystem, instance string) *actor.PID {
	return actor.NewPID(system.Address(), instance+"/"+SubtreeName+"/"+SchedulerName)
}
