package instance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/actors"
	"github.com/ankusa-go/ankusa/admin"
	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/dispatch"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/fleet"
	"github.com/ankusa-go/ankusa/intake"
	"github.com/ankusa-go/ankusa/lifecycle"
	"github.com/ankusa-go/ankusa/routes"
	"github.com/ankusa-go/ankusa/routes/registry"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/builtin"
	"github.com/ankusa-go/ankusa/sources"
	"github.com/ankusa-go/ankusa/storage"
	"github.com/ankusa-go/ankusa/storage/backup"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/supervision"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// ErrUnsupported refuses a configuration this build cannot run (see Check): booting it
// would mean answering 2xx on a promise nothing keeps.
var ErrUnsupported = errors.New("instance: configuration not supported by this build")

// Options are what the embedding process hands an instance besides its config.
type Options struct {
	Log     zerolog.Logger
	Version string
	// Faults is passed to the store; tests use it to hold or fail synced writes.
	Faults *store.Faults
	// WrapIngestListener wraps the ingest socket once bound; tests use it to inject accept
	// faults.
	WrapIngestListener func(net.Listener) net.Listener
	// Supervision overrides the tree's restart budget and back-off (tests shorten them).
	Supervision *supervision.Options
	// WrapSink, when set, wraps each sink the edge publishes to under wal.type none (tests
	// inject a sink fault by wrapping its Deliver).
	WrapSink func(source string, index int, s sinks.Sink) sinks.Sink
}

// mailboxGoroutines is how many goroutines the instance keeps parked for its actors' mailbox runs: more than
// the actors that run at once on the ingest path (the batchers and the writer), few enough to cost little
// memory when the node is idle.
const mailboxGoroutines = 64

// Instance is one running instance.
type Instance struct {
	cfg    *config.Config
	opts   Options
	log    zerolog.Logger
	tel    *telemetry.Telemetry
	health *edge.Health
	system *actor.ActorSystem
	// mailboxes runs the mailboxes of every actor the tree spawns (supervisionOptions); closed after the system.
	mailboxes *actors.Dispatcher
	edge      *edge.Edge
	disp      *dispatch.Dispatcher
	pub       *edge.Publisher // wal.type none: the sinks the edge publishes to
	fleet     *fleet.Store    // rate_limits.scope or dedupe.scope fleet: the shared Redis
	erase     *eraser         // tenant erase jobs (erase.go)
	// lifecycle are the sinks of lifecycle.sinks, built at boot (lifecycle.go).
	lifecycle []lifecycle.Target
	dual      *intake.Dual // wal.type dual: the intake log's committer, reconciler and recovery
	ilog      *intake.Log
	// sources are the file's and the API-managed sources (source_store); layered is the edge's view of them.
	sources      *sources.Set
	redisSources *sources.Redis // source_store.type redis
	layered      *edge.LayeredSources
	sourcesMu    sync.Mutex // serialises applySources
	// routes manages the edge role's route table (routes.go); nil without the edge role.
	routes     *registry.Registry
	routeTable *routes.Table
	// ratesMu serialises loading the store's rate-limit overrides into the edge with the admin API's changes,
	// so a change committed while the boot loads them is never undone by the load.
	ratesMu sync.Mutex
	kill    *actors.Kill
	tree    *supervision.Tree
	blob    blob.Store // the storage role's blob store
	// claimStore is the claim blob store, opened once (claimBlob) for the gateway, the check-ins and a tenant
	// erase (which may open it after boot, hence claimMu).
	claimMu    sync.Mutex
	claimStore blob.Store

	// backupTargets are the backup locations (primary, then secondary) while backup.enabled.
	backupTargets []backup.Target

	db        atomic.Pointer[store.DB]
	adminAddr atomic.Pointer[string]
	level     atomic.Int32 // the log level (zerolog.Level) the instance's logs are filtered at
	claimAddr atomic.Pointer[string]

	// debug runs the test-only watchers of the debug section (debug.kill_file).
	debug task.Group

	stopOnce sync.Once
	stopErr  error
}

// New prepares an instance; Start runs it.
func New(cfg *config.Config, opts Options) (*Instance, error) {
	if err := Check(cfg); err != nil {
		return nil, err
	}
	i := &Instance{cfg: cfg, opts: opts, health: &edge.Health{}, kill: actors.NewKill(),
		mailboxes: actors.NewDispatcher(mailboxGoroutines)}
	i.erase = newEraser(i)
	// The level can change at runtime (PUT /v1/log-level): the logger lets debug events through and the hook
	// drops those below the instance's level, so every logger derived from it follows the change.
	base := opts.Log.GetLevel()
	i.level.Store(int32(base))
	i.log = opts.Log.Level(min(base, zerolog.DebugLevel)).Hook(levelFilter{&i.level}).
		With().Str("instance", cfg.Instance).Logger()
	if path := cfg.Debug.HoldCommitsFile; path != "" {
		i.log.Warn().Str("debug.hold_commits_file", path).Msg("test-only switch set: synced writes wait while this file exists")
		i.opts.Faults = holdCommits(path, opts.Faults)
	}
	if cfg.Debug.Chaos {
		i.log.Warn().Bool("debug.chaos", true).Msg("test-only switch set: any actor can be crashed by name (kill injection)")
	}
	if path := cfg.Debug.KillFile; path != "" {
		i.log.Warn().Str("debug.kill_file", path).Msg("test-only switch set: the actor this file names crashes on every message")
	}
	i.tel = telemetry.New(cfg.Instance, i.log)
	return i, nil
}

// levelFilter drops the events below the instance's current level.
type levelFilter struct{ level *atomic.Int32 }

func (f levelFilter) Run(e *zerolog.Event, level zerolog.Level, _ string) {
	if level < zerolog.Level(f.level.Load()) {
		e.Discard()
	}
}

// SetLogLevel sets the level of the instance's logs, down to debug whatever the boot level (the actor system's
// own bridged logs keep the boot level).
func (i *Instance) SetLogLevel(l zerolog.Level) { i.level.Store(int32(l)) }

// Start boots the tree: it returns once every child started, or the error of the first
// one that could not (a port in use, a store that refuses to open).
func (i *Instance) Start() error {
	cfg := i.cfg
	i.system = actors.NewSystem(cfg.Instance, i.opts.Log) // NewSystem adds the instance field itself
	// A record sent to an actor that is being restarted reaches no one: answer it now.
	root := i.system.Root
	i.system.EventStream.Subscribe(func(evt any) {
		if dl, ok := evt.(*actor.DeadLetterEvent); ok {
			edge.AnswerDeadLetter(root, dl.Message)
		}
	})
	i.log.Info().Str("wal", cfg.WAL.Type).Strs("roles", cfg.EffectiveRoles()).Msg(telemetry.DurabilityLine(cfg.WAL.Type, cfg.Backup.Enabled, cfg.Backup.IntervalMS))
	without := 0
	for id, src := range cfg.Sources {
		if src.Dedupe == nil {
			without++
			// Design: "Without a source dedupe: setting (boot logs a warning per such source), that retry is a new hook".
			i.log.Warn().Str("source_id", id).Msg("source has no dedupe: a provider retry after a lost ack is stored and delivered again")
		}
	}
	i.tel.SourcesWithoutDedupe(without)
	if cfg.WAL.Type != config.WALNone {
		i.tel.Disk(cfg.Node.DataDir)
	}
	if err := i.prepareBackup(); err != nil {
		i.system.Shutdown()
		return fmt.Errorf("instance %s: %w", cfg.Instance, err)
	}

	i.newSources()
	children := []supervision.ChildSpec{
		{Name: "metrics", Props: i.withKill(newGaugesProps(i)), Domain: "metrics", Isolated: true},
		{Name: "store", Props: i.withKill(newStoreProps(i)), Domain: "core"},
	}
	if cfg.Backup.Enabled {
		children = append(children, i.backupChild())
	}
	children = append(children, []supervision.ChildSpec{
		// Dedupe keys expire here, never inside the writer.
		{Name: "dedupe-sweeper", Domain: "sweeper", Isolated: true,
			Props: i.withKill(store.NewDedupeSweeperProps(i.db.Load, time.Minute, 1000))},
		// Quarantine entries nobody released leave the pen after quarantine.retention_seconds.
		{Name: "quarantine-sweeper", Domain: "sweeper", Isolated: true,
			Props: i.withKill(store.NewQuarantineSweeperProps(i.db.Load, penRetention(cfg), penSweepInterval(cfg), 1000))},
		// Audit rows a crash left pending are settled at boot; rows past audit.retention_days are pruned.
		{Name: "audit-sweeper", Domain: "sweeper", Isolated: true,
			Props: i.withKill(store.NewAuditSweeperProps(i.db.Load, time.Duration(cfg.Audit.RetentionDays)*24*time.Hour,
				time.Minute, cfg.LifecycleEnabled(), i.settleSource()))},
	}...)
	if cfg.HasRole("edge") {
		static, err := edge.NewStaticSources(cfg.Sources)
		if err != nil {
			i.system.Shutdown()
			return fmt.Errorf("instance %s: %w", cfg.Instance, err)
		}
		i.layered = edge.NewLayeredSources(static)
		set := edge.SettingsFrom(cfg)
		set.WrapListener = i.opts.WrapIngestListener
		// A commit writes an archive obligation only while a compactor runs to clear it (inventory E.3).
		set.Archive = cfg.HasRole(config.RoleStorage)
		i.edge = edge.New(set, i.system, edge.NewResolver(cfg.HTTP.Routing, cfg.HTTP.Prefix),
			i.layered, i.tel, i.health)
		i.edge.SetStore(i.db.Load)
		i.newRoutes()
		if cfg.WAL.Type == config.WALNone {
			i.loadRoutes() // no store to wait for: the seed is the table
		}
		if cfg.FleetEnabled() {
			i.fleet = fleet.New(cfg.Fleet, set.PendingTTL, i.tel.FleetDegraded)
			i.edge.SetFleet(i.fleet)
		}
		if cfg.WAL.Type == config.WALNone {
			// Direct ack: the edge publishes to the sinks in the request; no writer, no
			// batchers, no dispatch (EffectiveRoles dropped it), no compactor.
			p, err := edge.NewPublisher(cfg, builtin.NewRegistry(), i.tel, i.opts.WrapSink)
			if err != nil {
				i.system.Shutdown()
				return fmt.Errorf("instance %s: %w", cfg.Instance, err)
			}
			i.pub = p
			claim, err := i.claimFunc()
			if err != nil {
				p.Close()
				i.system.Shutdown()
				return fmt.Errorf("instance %s: %w", cfg.Instance, err)
			}
			// Bodies over the source's inline limit are checked in inside the request (inventory D.5).
			p.SetClaimCheck(claim)
			i.edge.SetPublisher(p)
		}
		if cfg.WAL.Type == config.WALDual {
			if err := i.prepareIntake(); err != nil {
				i.system.Shutdown()
				return fmt.Errorf("instance %s: %w", cfg.Instance, err)
			}
			i.edge.SetIntake(i.dual, cfg.Intake.RetryAfterS)
		}
		children = append(children, supervision.ChildSpec{
			Name: edge.SubtreeName, Props: supervision.NewProps(i.edgeChildren(), i.supervisionOptions()), Domain: "core",
		})
	}
	if cfg.HasRole(config.RoleDispatch) {
		d, err := dispatch.New(cfg, i.dispatchStore, builtin.NewRegistry(), i.tel)
		if err != nil {
			i.system.Shutdown()
			return fmt.Errorf("instance %s: %w", cfg.Instance, err)
		}
		i.disp = d
		claim, err := i.claimFunc()
		if err != nil {
			d.Close()
			i.system.Shutdown()
			return fmt.Errorf("instance %s: %w", cfg.Instance, err)
		}
		d.SetClaimCheck(claim)
		d.WrapLanes(i.withKill)
		children = append(children, supervision.ChildSpec{
			Name: dispatch.SubtreeName, Domain: "dispatch", Isolated: true,
			Props: supervision.NewProps([]supervision.ChildSpec{
				{Name: dispatch.SchedulerName, Domain: "dispatch", Props: i.withKill(dispatch.NewSchedulerProps(d))},
				{Name: dispatch.ReplayerName, Domain: "dispatch", Props: i.withKill(dispatch.NewReplayerProps(d))},
			}, i.supervisionOptions()),
		})
	}
	// The API-managed sources reach the edge and dispatch once the store is open, then on every change.
	children = append(children, supervision.ChildSpec{Name: "sources", Domain: "sources", Isolated: true,
		Props: i.withKill(newSourceWatcherProps(i))})
	if cfg.HasRole(config.RoleStorage) {
		spec, err := i.storageChild()
		if err != nil {
			i.system.Shutdown()
			return fmt.Errorf("instance %s: %w", cfg.Instance, err)
		}
		children = append(children, spec)
		if i.disp != nil {
			// Archive replay jobs run in dispatch's replayer (it knows each source's current sinks and paces
			// replays against live traffic); the archive is read through this function, so dispatch never
			// imports the storage role.
			log := i.log.With().Str("component", "replayer").Logger()
			i.disp.SetArchiveReader(func(ctx context.Context, from, to int64, pos store.ArchiveCursor) (store.ArchiveBatch, error) {
				db := i.db.Load()
				if db == nil {
					return store.ArchiveBatch{}, store.ErrClosed
				}
				return storage.ReplayNext(ctx, db, i.blob, from, to, pos, log)
			})
		}
	}
	if cfg.HasRole(config.RoleClaimCheck) {
		c, err := i.claimGatewayChild()
		if err != nil {
			i.system.Shutdown()
			return fmt.Errorf("instance %s: %w", cfg.Instance, err)
		}
		children = append(children, c)
	}
	if cfg.Admin.Enabled {
		deps, err := i.adminDeps()
		if err != nil {
			i.system.Shutdown()
			return fmt.Errorf("instance %s: %w", cfg.Instance, err)
		}
		children = append(children, supervision.ChildSpec{Name: "admin", Props: i.withKill(admin.NewProps(deps)), Domain: "admin", Isolated: true})
	}
	if cfg.LifecycleEnabled() {
		if err := i.buildLifecycle(); err != nil {
			i.system.Shutdown()
			return fmt.Errorf("instance %s: %w", cfg.Instance, err)
		}
		children = append(children, i.lifecycleChild())
	}
	if i.sources.Kind() == sources.KindStatic {
		i.applySources() // nothing to wait for
	}
	tree, err := supervision.Start(i.system, cfg.Instance, children, i.supervisionOptions())
	if err != nil {
		i.system.Shutdown()
		i.mailboxes.Close()
		// The sinks built for this boot hold connections (a broker client's goroutines).
		if i.disp != nil {
			i.disp.Close()
		}
		i.closeLifecycle()
		if i.pub != nil {
			i.pub.Close()
		}
		i.closeFleet()
		if i.ilog != nil {
			i.ilog.Close()
		}
		return fmt.Errorf("instance %s: cannot start: %w", cfg.Instance, err)
	}
	i.tree = tree
	if cfg.WAL.Type != config.WALNone {
		i.erase.resumeWhenOpen()
	}
	if i.dual != nil {
		// The store is open: recovery replays the log, then the reconciler runs; nothing is served before.
		i.dual.Start()
	}
	if cfg.Debug.KillFile != "" {
		i.watchKillFile(&i.debug)
	}
	return nil
}

// edgeChildren is the edge subtree, rest-for-one in this order: the writer, the pen
// writer, the limiter, the partition batchers, the listener. A writer crash restarts
// the batchers and the listener after it; a listener crash touches nothing before it.
// Under wal.type none there is no writer and no batcher: the listener's requests publish
// to the sinks themselves.
func (i *Instance) edgeChildren() []supervision.ChildSpec {
	cfg := i.cfg
	if cfg.WAL.Type == config.WALNone {
		return []supervision.ChildSpec{
			{Name: edge.PenChild, Domain: "core", Props: i.withKill(edge.NewPenProps(i.edge))},
			{Name: edge.LimiterChild, Domain: "core", Props: i.withKill(edge.NewLimiterProps(i.edge))},
			{Name: edge.ListenerName, Domain: "core", Props: i.withKill(edge.NewListenerProps(i.edge))},
		}
	}
	writer := edge.WriterPID(i.system, cfg.Instance)
	specs := []supervision.ChildSpec{{
		Name: edge.WriterName, Domain: "core",
		Props: i.withKill(store.NewWriterProps(i.committer(), store.WriterOptions{
			GroupMaxBytes:   cfg.Batcher.GroupCommitMaxBytes,
			GroupMaxRecords: cfg.Batcher.GroupCommitMaxRecords,
			OnCommit:        i.onCommit,
			// A crashed writer holds batches in a suspended mailbox: their handlers answer them now.
			OnPanic: i.edge.PipelineCrashed,
		})),
	}}
	// The quarantine pen's writer: one group commit per tick, apart from the hooks' writer.
	specs = append(specs, supervision.ChildSpec{Name: edge.PenChild, Domain: "core", Props: i.withKill(edge.NewPenProps(i.edge))})
	specs = append(specs, supervision.ChildSpec{Name: edge.LimiterChild, Domain: "core", Props: i.withKill(edge.NewLimiterProps(i.edge))})
	for p := range cfg.Batcher.Partitions {
		specs = append(specs, supervision.ChildSpec{Name: edge.BatcherChild(p), Domain: "core", Props: i.withKill(edge.NewBatcherProps(i.edge, p, writer))})
	}
	return append(specs, supervision.ChildSpec{Name: edge.ListenerName, Domain: "core", Props: i.withKill(edge.NewListenerProps(i.edge))})
}

// storageChild is the storage subtree, an isolated domain: the compactor, named <instance>/storage/compactor.
// Its blob store (storage.type; local by default under <data_dir>/<instance>/segments) is opened here, so a
// store that cannot be opened fails the boot with its error.
func (i *Instance) storageChild() (supervision.ChildSpec, error) {
	cfg := i.cfg
	if !storage.ValidNode(cfg.NodeID()) {
		return supervision.ChildSpec{}, fmt.Errorf("storage: node id %q cannot be part of an object key ([A-Za-z0-9._=-])", cfg.NodeID())
	}
	bs, err := blob.Open(context.Background(), cfg.StorageBlobStore())
	if err != nil {
		return supervision.ChildSpec{}, fmt.Errorf("storage: cannot open the blob store: %w", err)
	}
	i.blob = bs
	props := storage.NewCompactorProps(storage.ActorOptions{
		Compactor: storage.CompactorOptions{
			DB: i.db.Load, Blob: bs, Node: cfg.NodeID(), RollBytes: cfg.Storage.RollBytes,
			RollAge:   time.Duration(cfg.Storage.RollMS) * time.Millisecond,
			Retention: time.Duration(cfg.Archive.RetentionDays) * 24 * time.Hour,
			Log:       i.log.With().Str("component", "compactor").Logger(),
		},
		Interval:    time.Duration(cfg.Storage.IntervalMS) * time.Millisecond,
		PacePercent: cfg.Storage.PacePercent,
		MaxLagBytes: int64(cfg.Storage.MaxLagSegments) * cfg.Storage.RollBytes,
		MaxLagAge:   time.Duration(cfg.Storage.MaxLagMS) * time.Millisecond,
		Tel:         i.tel,
	})
	i.log.Info().Str("blob_store", bs.String()).Int64("roll_bytes", cfg.Storage.RollBytes).
		Int("pace_percent", cfg.Storage.PacePercent).Int64("max_lag_bytes", int64(cfg.Storage.MaxLagSegments)*cfg.Storage.RollBytes).
		Int("max_lag_ms", cfg.Storage.MaxLagMS).
		Int("archive_retention_days", cfg.Archive.RetentionDays).Msg("archive compactor enabled")
	return supervision.ChildSpec{
		Name: storage.SubtreeName, Domain: "storage", Isolated: true,
		Props: supervision.NewProps([]supervision.ChildSpec{
			{Name: storage.CompactorName, Domain: "storage", Props: i.withKill(props)},
		}, i.supervisionOptions()),
	}, nil
}

// Blob is the storage role's blob store (nil without the storage role).
func (i *Instance) Blob() blob.Store { return i.blob }

func (i *Instance) supervisionOptions() supervision.Options {
	o := supervision.Options{}
	if i.opts.Supervision != nil {
		o = *i.opts.Supervision
	}
	o.Dispatcher = i.mailboxes
	o.OnEvent = func(ev supervision.Event) {
		i.tel.Subtree(telemetry.SubtreeEvent{Kind: ev.Kind, Domain: string(ev.Domain), Child: ev.Child, Reason: ev.Reason, Delay: ev.Delay})
	}
	return o
}

// withKill gives an actor the kill injection under debug.chaos; otherwise p is returned as it is.
func (i *Instance) withKill(p *actor.Props) *actor.Props {
	if !i.cfg.Debug.Chaos {
		return p
	}
	return p.Configure(actor.WithReceiverMiddleware(actors.WithKillInjection(i.kill)))
}

func (i *Instance) onCommit(c store.CommitInfo) {
	if errors.Is(c.Err, store.ErrIntakeUnavailable) || errors.Is(c.Err, store.ErrRecovering) {
		return // refused before the store was touched (wal.type dual): not a store failure
	}
	class := ""
	if c.Err != nil {
		i.storeWriteFailed(time.Now())
		class = "other"
		var we *store.WriteError
		if errors.As(c.Err, &we) {
			class = string(we.Class)
		}
	} else {
		i.health.WriteSucceeded()
	}
	i.tel.Commit(c.Duration, c.Records, c.Bytes, c.Err, class)
}

// Drain stops taking traffic the way the design orders it: /ready turns 503 at once,
// the listener keeps serving for listener.drain_delay_ms, then the tree stops in
// reverse order, so the listener closes and waits for every request it serves before
// the batchers, the writer and the store stop. Every request in flight is answered.
func (i *Instance) Drain(ctx context.Context) error {
	i.health.SetDraining()
	i.log.Info().Int("drain_delay_ms", i.cfg.Listener.DrainDelayMS).Msg("draining")
	t := time.NewTimer(time.Duration(i.cfg.Listener.DrainDelayMS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return i.Stop()
}

// Stop stops the tree (reverse order) and the actor system. It is idempotent.
func (i *Instance) Stop() error {
	i.stopOnce.Do(func() {
		i.debug.Stop()
		i.erase.close()
		if i.dual != nil {
			i.dual.Stop() // the reconciler; the writer's groups still await their confirms below
		}
		if i.edge != nil {
			i.edge.CloseSocket() // the listener's stop below closes the socket: no restart follows
		}
		if i.tree != nil {
			// A request in flight waits at most its record deadline, or under wal.type none its
			// publish deadline.
			wait := i.cfg.Batcher.RecordDeadlineMS
			if i.cfg.WAL.Type == config.WALNone {
				wait = i.cfg.WAL.PublishTimeoutMS
			}
			timeout := time.Duration(i.cfg.Listener.DrainTimeoutMS+wait)*time.Millisecond + 5*time.Second
			i.stopErr = i.tree.Stop(timeout)
			if left := actors.Live(i.system); i.stopErr == nil && len(left) > 0 {
				// Shutting the system down would leave these running with nobody to stop them.
				i.stopErr = fmt.Errorf("instance %s: actors left after the tree stopped: %s", i.cfg.Instance, strings.Join(left, ", "))
			}
		}
		if i.system != nil {
			i.system.Shutdown()
		}
		i.mailboxes.Close()
		if i.disp != nil {
			i.disp.Close()
		}
		i.closeLifecycle()
		if i.pub != nil {
			i.pub.Close() // after the listener stopped: no request publishes any more
		}
		i.closeFleet()
		if i.ilog != nil {
			i.ilog.Close() // after the writer stopped: no group awaits a confirm any more
		}
		if i.redisSources != nil {
			_ = i.redisSources.Close()
		}
		i.log.Info().Msg("instance stopped")
	})
	return i.stopErr
}

// closeFleet closes the fleet store's connections, once no request uses them.
func (i *Instance) closeFleet() {
	if i.fleet != nil {
		_ = i.fleet.Close()
	}
}

// Fatal fires when a core domain exhausted its restart budget: the process should stop
// the instance and exit so that whatever supervises it starts it again.
func (i *Instance) Fatal() <-chan error {
	if i.tree == nil {
		return nil
	}
	return i.tree.Fatal()
}

// Config returns the instance's config.
func (i *Instance) Config() *config.Config { return i.cfg }

// IngestAddr is the ingest listener's bound address.
func (i *Instance) IngestAddr() string {
	if i.edge == nil {
		return ""
	}
	return i.edge.Addr()
}

// ClaimCheckAddr is the claim gateway's bound address ("" before it listens or without the claim_check role).
func (i *Instance) ClaimCheckAddr() string {
	if p := i.claimAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// AdminAddr is the admin listener's bound address.
func (i *Instance) AdminAddr() string {
	if p := i.adminAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// Store is the open store (nil while it is closed); tests read hooks through it.
func (i *Instance) Store() *store.DB { return i.db.Load() }

// Telemetry is the instance's telemetry (metrics registry, logger).
func (i *Instance) Telemetry() *telemetry.Telemetry { return i.tel }

// Kill is the instance's kill injection (chaos tests crash named actors with it); arming does nothing unless
// debug.chaos is true.
func (i *Instance) Kill() *actors.Kill { return i.kill }

// dbRef lets the writer reach whichever store is open now: a restarted store hands the
// next writer a new handle without the writer's props changing.
type dbRef struct{ i *Instance }

func (r dbRef) CommitHooks(recs []*store.Record) (uint64, error) {
	db := r.i.db.Load()
	if db == nil {
		return 0, store.ErrClosed
	}
	// Bracketed for the stall watchdog (storeowner.go), which only reads the start.
	r.i.health.CommitStarted(time.Now())
	defer r.i.health.CommitEnded()
	return db.CommitHooks(recs)
}

// dispatchStore hands dispatch the open store, or nil (never a typed nil) while it is closed.
func (i *Instance) dispatchStore() dispatch.Store {
	if db := i.db.Load(); db != nil {
		return db
	}
	return nil
}

// Dispatcher is the instance's delivery state (nil without the dispatch role); replay
// jobs are created through it.
func (i *Instance) Dispatcher() *dispatch.Dispatcher { return i.disp }

// Edge is the instance's ingest state (nil without the edge role).
func (i *Instance) Edge() *edge.Edge { return i.edge }

// penRetention is quarantine.retention_seconds.
func penRetention(cfg *config.Config) time.Duration {
	return time.Duration(cfg.Quarantine.RetentionSeconds) * time.Second
}

// penSweepInterval is how often the quarantine sweeper looks: a quarter of the retention, so an entry outlives it
// by at most that much, and at most a minute.
func penSweepInterval(cfg *config.Config) time.Duration {
	return min(penRetention(cfg)/4, time.Minute)
}
