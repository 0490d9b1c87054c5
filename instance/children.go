package instance

import (
	"context"
	"net/http"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/admin"
	"github.com/ankusa-go/ankusa/admin/console"
	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/storage"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// gauges samples what the metrics cannot count as it happens: queue depth and the store's
// next seq, every interval. Each sample is a few atomic reads: O(1) whatever the backlog.
type gauges struct {
	i     *Instance
	tasks *task.Group // the ticker; one group per incarnation
}

type tick struct{}

const gaugeInterval = time.Second

func newGaugesProps(i *Instance) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &gauges{i: i} })
}

func (g *gauges) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		g.tasks = &task.Group{}
		self, root := ctx.Self(), ctx.ActorSystem().Root
		g.tasks.Every(gaugeInterval, func() { root.Send(self, tick{}) })
	case tick:
		g.sample()
	case *actor.Stopping, *actor.Restarting:
		if g.tasks != nil {
			g.tasks.Stop()
			g.tasks = nil
		}
	}
}

func (g *gauges) sample() {
	if g.i.edge != nil {
		g.i.tel.IngestQueue(g.i.edge.Queue())
	}
	if db := g.i.db.Load(); db != nil {
		g.i.tel.StoreNextSeq(db.NextSeq())
		g.i.tel.ArchivePending(db.Counts().ArchivePending)
		m := db.Memory()
		g.i.tel.StoreMemory("block_cache", m.BlockCache)
		g.i.tel.StoreMemory("block_cache_pinned", m.BlockCachePinned)
		g.i.tel.StoreMemory("block_cache_capacity", m.BlockCacheCapacity)
		g.i.tel.StoreMemory("memtables", m.Memtables)
		g.i.tel.StoreMemory("memtables_pinned", m.MemtablesPinned)
		g.i.tel.StoreMemory("table_readers", m.TableReaders)
		g.i.tel.StoreTrash(db.TrashBytes())
	}
	g.i.tel.StoreUnavailable(g.i.health.StoreUnavailable(time.Now()))
}

// adminDeps is what the admin listener reads and steers. Under the embedded default config (no file found,
// the `make run` case) with no principal configured, it adds a local principal of every scope and tenant whose
// token is <data_dir>/<instance>/admin.token, written once with mode 0600, so the CLI on this machine works at
// once; the log names the file, never the token.
func (i *Instance) adminDeps() (*admin.Deps, error) {
	cfg := i.cfg
	ps := cfg.Admin.Principals
	if cfg.Embedded && len(ps) == 0 {
		path := filepath.Join(cfg.Node.DataDir, cfg.Instance, admin.LocalTokenFile)
		created, err := admin.EnsureLocalToken(path)
		if err != nil {
			return nil, err
		}
		ps = []config.Principal{{Name: "local", TokenFile: path, Scopes: config.AdminScopes, Tenants: []string{"*"}}}
		i.log.Info().Str("token_file", path).Bool("created", created).
			Msg("admin: embedded default config, the local principal's token is in token_file (every scope)")
	}
	d := &admin.Deps{
		Config: cfg, Version: i.opts.Version, Log: i.log.With().Str("component", "admin").Logger(),
		Metrics: i.tel.Handler(), Principals: ps, Dispatcher: i.disp, SetLogLevel: i.SetLogLevel,
		LogLevel: func() zerolog.Level { return zerolog.Level(i.level.Load()) },
		Store:    func() *store.DB { return i.db.Load() },
		Sources:  i.sources,
		// Source changes are flagged for publication in their audit row's batch while lifecycle.sinks is set.
		Lifecycle: cfg.LifecycleEnabled(),
		Ready: func(now time.Time) (bool, map[string]any) {
			ok, status, st := i.health.Ready(now)
			body := map[string]any{"status": status, "instance": cfg.Instance, "store": st}
			if watched, failing := i.health.Sinks(now); watched {
				// wal.type none: the sinks are where a hook is kept, so a failing one is a check.
				body["sinks"] = "ok"
				if len(failing) > 0 {
					body["sinks"], body["reasons"] = "failing", map[string]any{"sinks": failing}
				}
			}
			return ok, body
		},
		Bound:    func(addr string) { i.adminAddr.Store(&addr) },
		Gatherer: i.tel.Metrics.Registry,
	}
	d.Console = func(api *admin.API) (http.Handler, error) {
		return console.New(api, console.Options{Log: d.Log.With().Str("component", "console").Logger()})
	}
	if cfg.WAL.Type != config.WALNone {
		d.EraseTenant = i.erase.erase
	}
	if dual := i.dual; dual != nil {
		d.Intake = func() admin.IntakeStatus {
			st := dual.Status()
			out := admin.IntakeStatus{Node: st.Node, State: st.State, Pending: st.Pending, Watermark: st.Watermark}
			for _, p := range st.Partitions {
				out.Partitions = append(out.Partitions, admin.IntakePartition{Partition: p.Partition, Offset: p.Offset, Watermark: p.Watermark})
			}
			return out
		}
	}
	if i.blob != nil {
		d.FetchArchived = func(ctx context.Context, id [16]byte) (store.Hook, error) {
			db := i.db.Load()
			if db == nil {
				return store.Hook{}, store.ErrClosed
			}
			var oldest time.Time
			if days := cfg.Storage.CatalogueRetentionDays; days > 0 {
				oldest = time.Now().Add(-time.Duration(days) * 24 * time.Hour)
			}
			return storage.FetchVisible(ctx, db, i.blob, id, oldest)
		}
	}
	if i.edge != nil {
		d.Routes = i.routes
		d.RateOverride = func(tenant string, r *config.Rate) {
			i.ratesMu.Lock()
			defer i.ratesMu.Unlock()
			i.edge.SetRateOverride(tenant, r)
		}
		d.Release = func(source string, limit int) (admin.ReleaseReport, error) {
			r, err := i.edge.ReleaseQuarantine(source, limit)
			return admin.ReleaseReport{Released: r.Released, Duplicates: r.Duplicates, Held: r.Held}, err
		}
	}
	return d, nil
}
