package instance

import (
	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/routes"
	"github.com/ankusa-go/ankusa/routes/registry"
	"github.com/ankusa-go/ankusa/store"
)

// newRoutes builds the edge role's route table and its registry (routes.*). The table is the instance's own:
// two instances in one process hold two tables. The guard reads it only while routes.enabled; the admin API
// manages routes (and answers its dry run) either way, so a table can be prepared before it is turned on.
func (i *Instance) newRoutes() {
	cfg := i.cfg
	// Validate parsed both already: a config that reached here has well-formed proxies.
	proxies, _ := routes.ParseProxies(cfg.Routes.TrustedProxies)
	i.routeTable = routes.NewTable()
	o := registry.Options{Table: i.routeTable, Max: cfg.Routes.MaxRoutes, Lifecycle: cfg.LifecycleEnabled(),
		IPRules: cfg.Routes.IPRules, Proxies: proxies, Seed: cfg.Routes.Seed, Changed: i.tel.Routes,
		Log: i.log.With().Str("component", "routes").Logger()}
	if cfg.WAL.Type != config.WALNone {
		o.DB = func() *store.DB { return i.db.Load() }
	}
	i.routes = registry.New(o)
	if cfg.Routes.Enabled {
		i.edge.SetRoutes(i.routeTable, cfg.Routes.IPDeniedStatus, cfg.Routes.LogSample)
	}
}

// loadRoutes fills the route table from the store and routes.seed; the store owner calls it when the store
// opens, before ingest opens, so the guard never serves a request from an empty table it could have filled.
func (i *Instance) loadRoutes() {
	if i.routes == nil {
		return
	}
	if err := i.routes.Load(); err != nil {
		i.log.Error().Err(err).Msg("routes not loaded: the route guard refuses every request until they are")
		return
	}
	n := i.routeTable.Load().Len()
	if i.cfg.Routes.Enabled {
		i.log.Info().Int("routes", n).Msg("route guard on")
	}
}
