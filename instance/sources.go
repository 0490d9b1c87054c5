package instance

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/admin"
	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/builtin"
	"github.com/ankusa-go/ankusa/sources"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// sourceWatchInterval is how often a node polls the Redis source store's change counter.
const sourceWatchInterval = time.Second

// newSources builds the node's source set (source_store) and its backend. Under wal.type none a persistent
// store has no store to live in and acts as static.
func (i *Instance) newSources() {
	cfg := i.cfg
	var backend sources.Backend = sources.Persistent{DB: i.db.Load}
	switch {
	case cfg.SourceStore.Type == config.SourceStoreStatic,
		cfg.SourceStore.Type == config.SourceStorePersistent && cfg.WAL.Type == config.WALNone:
		backend = sources.Static{}
	case cfg.SourceStore.Type == config.SourceStoreRedis:
		i.redisSources = sources.NewRedis(cfg.SourceStore.Redis, i.db.Load)
		backend = i.redisSources
	}
	i.sources = sources.NewSet(cfg, backend)
	reg := builtin.NewRegistry()
	deps := sinks.Deps{Instance: cfg.Instance, Log: i.log}
	// An API source must build as a file's source does at boot: its verifier and its sinks.
	i.sources.Check = func(_ string, s config.Source) error {
		if _, err := edge.NewTrust(s); err != nil {
			return err
		}
		for _, spec := range s.Sinks {
			k, err := reg.New(spec, deps)
			if err != nil {
				return err
			}
			_ = k.Close()
		}
		return nil
	}
	i.sources.Changed = i.applySources
}

// applySources hands the API-managed sources to the edge and dispatch; a store that cannot answer makes the
// edge answer 503 for a source the file does not name.
func (i *Instance) applySources() {
	i.sourcesMu.Lock()
	defer i.sourcesMu.Unlock()
	m, err := i.sources.Sources()
	if err != nil {
		i.failSources(err)
		return
	}
	if i.layered != nil {
		if err := i.layered.Set(m); err != nil {
			i.log.Error().Err(err).Msg("API-managed sources not applied to the edge")
		}
	}
	if i.disp != nil {
		if err := i.disp.SetSources(m); err != nil {
			i.log.Error().Err(err).Msg("API-managed sources not applied to dispatch")
		}
	}
}

func (i *Instance) failSources(err error) {
	if i.layered != nil {
		i.layered.Fail(err)
	}
	i.log.Warn().Err(err).Msg("source store cannot answer: sources the file does not name answer 503")
}

// loadRateOverrides hands the store's runtime rate-limit overrides (admin API) to the edge; the store owner
// calls it when the store opens, before ingest opens, so an override survives a restart.
func (i *Instance) loadRateOverrides() {
	i.ratesMu.Lock()
	defer i.ratesMu.Unlock()
	db := i.db.Load()
	if db == nil {
		return
	}
	rows, err := db.ListRateLimits()
	if err != nil {
		i.log.Error().Err(err).Msg("rate-limit overrides not loaded: the config's limits apply")
		return
	}
	all := make(map[string]config.Rate, len(rows))
	for _, row := range rows {
		r, err := admin.DecodeRateOverride(row.Spec)
		if err != nil {
			i.log.Error().Err(err).Str("tenant", row.Tenant).Msg("rate-limit override skipped")
			continue
		}
		all[row.Tenant] = r
	}
	i.edge.SetRateOverrides(all)
	if len(all) > 0 {
		i.log.Info().Int("overrides", len(all)).Msg("rate-limit overrides loaded")
	}
}

// settleSource is the audit sweeper's reader of the subjects a crash left pending (nil: none can be read).
func (i *Instance) settleSource() store.SubjectState {
	if i.redisSources == nil {
		return nil
	}
	return i.redisSources.Settle
}

// sourceWatcher loads the API-managed sources once the store is open and, for a Redis store, follows its
// changes (another node's writes) and outages.
type sourceWatcher struct {
	i     *Instance
	tasks *task.Group
}

func newSourceWatcherProps(i *Instance) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &sourceWatcher{i: i} })
}

func (w *sourceWatcher) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		w.tasks = &task.Group{}
		i := w.i
		w.tasks.Go(func(stop <-chan struct{}) {
			if r := i.redisSources; r != nil {
				r.Watch(stop, sourceWatchInterval, i.applySources, i.failSources)
				return
			}
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			for i.cfg.WAL.Type != config.WALNone && i.db.Load() == nil {
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
			i.applySources()
		})
	case *actor.Stopping, *actor.Restarting:
		if w.tasks != nil {
			w.tasks.Stop()
			w.tasks = nil
		}
	}
}
