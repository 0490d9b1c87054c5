package admin

import (
	"net/http"
	"slices"
	"time"
)

// route is one endpoint the router serves; the table is what the OpenAPI test compares the document with.
type route struct {
	method, pattern string
	// scopes: a principal holding any of them may call the route; nil means the route is open (probes, the
	// scrape unless admin.metrics_auth, the API document).
	scopes  []string
	handler func(http.ResponseWriter, *http.Request, *principal)
}

// Scopes of the routes (config.AdminScopes lists every scope a principal may hold).
const (
	scopeConfigRead      = "config:read"
	scopeMetricsRead     = "metrics:read"
	scopeDLQRead         = "dlq:read"
	scopeReplaysWrite    = "replays:write"
	scopeQuarantineRead  = "quarantine:read"
	scopeQuarantineWrite = "quarantine:write"
	scopeLogLevelWrite   = "log_level:write"
	scopeTenantsWrite    = "tenants:write"
	scopeAuditRead       = "audit:read"
	scopeSourcesRead     = "sources:read"
	scopeSourcesWrite    = "sources:write"
	scopeRateLimitsWrite = "rate_limits:write"
	scopeRoutesRead      = "routes:read"
	scopeRoutesWrite     = "routes:write"
)

func scopes(s ...string) []string { return s }

// routes lists every endpoint, in the order of the API document.
func (a *api) routes() []route {
	routeReaders := scopes(scopeRoutesRead, scopeRoutesWrite, scopeConfigRead)
	metrics := scopes(scopeMetricsRead)
	if !a.d.Config.Admin.MetricsAuth {
		metrics = nil
	}
	return []route{
		{"GET", "/health", nil, a.health},
		{"GET", "/ready", nil, a.ready},
		{"GET", "/metrics", metrics, func(w http.ResponseWriter, r *http.Request, _ *principal) {
			a.d.Metrics.ServeHTTP(w, r)
		}},
		{"GET", "/v1/openapi.yaml", nil, a.openAPI},
		{"GET", "/asyncapi.json", scopes(scopeConfigRead), a.asyncAPI},
		{"GET", "/v1/config", scopes(scopeConfigRead), a.config},
		{"GET", "/v1/wal", scopes(scopeConfigRead, scopeMetricsRead), a.wal},
		{"GET", "/v1/dlq", scopes(scopeDLQRead), a.dlq},
		{"GET", "/v1/hooks/{id}", scopes(scopeDLQRead), a.getHook},
		{"DELETE", "/v1/tenants/{tenant}", scopes(scopeTenantsWrite), a.eraseTenant},
		{"POST", "/v1/replays", scopes(scopeReplaysWrite), a.createReplay},
		{"GET", "/v1/replays", scopes(scopeReplaysWrite, scopeDLQRead), a.listReplays},
		{"GET", "/v1/replays/{id}", scopes(scopeReplaysWrite, scopeDLQRead), a.getReplay},
		{"PATCH", "/v1/replays/{id}", scopes(scopeReplaysWrite), a.steerReplay("")},
		{"POST", "/v1/replays/{id}/pause", scopes(scopeReplaysWrite), a.steerReplay("paused")},
		{"POST", "/v1/replays/{id}/resume", scopes(scopeReplaysWrite), a.steerReplay("running")},
		{"POST", "/v1/replays/{id}/cancel", scopes(scopeReplaysWrite), a.steerReplay("cancelled")},
		{"GET", "/v1/quarantine", scopes(scopeQuarantineRead), a.listQuarantine},
		{"DELETE", "/v1/quarantine", scopes(scopeQuarantineWrite), a.purgeQuarantine},
		{"POST", "/v1/quarantine/release", scopes(scopeQuarantineWrite), a.releaseQuarantine},
		{"PUT", "/v1/log-level", scopes(scopeLogLevelWrite), a.setLogLevel},
		{"GET", "/v1/audit", scopes(scopeAuditRead), a.listAudit},
		{"GET", "/v1/tenants/{tenant}/sources", scopes(scopeSourcesRead, scopeSourcesWrite), a.listSources},
		{"GET", "/v1/tenants/{tenant}/sources/{name}", scopes(scopeSourcesRead, scopeSourcesWrite), a.getSource},
		{"PUT", "/v1/tenants/{tenant}/sources/{name}", scopes(scopeSourcesWrite), a.putSource},
		{"DELETE", "/v1/tenants/{tenant}/sources/{name}", scopes(scopeSourcesWrite), a.deleteSource},
		{"GET", "/v1/rate-limits", scopes(scopeRateLimitsWrite, scopeConfigRead), a.listRateLimits},
		{"GET", "/v1/tenants/{tenant}/rate-limit", scopes(scopeRateLimitsWrite, scopeConfigRead), a.getRateLimit},
		{"PUT", "/v1/tenants/{tenant}/rate-limit", scopes(scopeRateLimitsWrite), a.putRateLimit},
		{"DELETE", "/v1/tenants/{tenant}/rate-limit", scopes(scopeRateLimitsWrite), a.deleteRateLimit},
		{"GET", "/v1/routes", routeReaders, a.listRoutes},
		{"POST", "/v1/routes", scopes(scopeRoutesWrite), a.createRoute},
		{"POST", "/v1/routes/test", routeReaders, a.testRoute},
		{"GET", "/v1/routes/{id}", routeReaders, a.getRoute},
		{"PUT", "/v1/routes/{id}", scopes(scopeRoutesWrite), a.putRoute},
		{"PATCH", "/v1/routes/{id}", scopes(scopeRoutesWrite), a.patchRoute},
		{"DELETE", "/v1/routes/{id}", scopes(scopeRoutesWrite), a.deleteRoute},
		{"GET", "/v1/ip-rules", routeReaders, a.getIPRules},
		{"PUT", "/v1/ip-rules", scopes(scopeRoutesWrite), a.putIPRules},
	}
}

// api answers the routes; it reads everything through Deps.
type api struct {
	d          *Deps
	principals []principal
}

// NewRouter returns the admin API's handler. It fails when a principal's token_file cannot be read.
func NewRouter(d *Deps) (http.Handler, error) {
	ps, err := principals(d.Principals)
	if err != nil {
		return nil, err
	}
	a := &api{d: d, principals: ps}
	mux := http.NewServeMux()
	if d.Console != nil {
		c, err := d.Console(&API{a: a, mux: mux})
		if err != nil {
			return nil, err
		}
		mux.Handle("/console/", c)
	}
	for _, r := range a.routes() {
		h := r.handler
		if r.scopes == nil {
			mux.HandleFunc(r.method+" "+r.pattern, func(w http.ResponseWriter, req *http.Request) { h(w, req, nil) })
			continue
		}
		mux.Handle(r.method+" "+r.pattern, guard(ps, r.scopes, h))
	}
	// Anything else is a JSON 404 (a known path with another method keeps the mux's 405 and Allow).
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, codeNotFound, nil)
	})
	return mux, nil
}

// Patterns lists the "METHOD /path" of every route, for the API document's test.
func Patterns(d *Deps) []string {
	a := &api{d: d}
	var out []string
	for _, r := range a.routes() {
		out = append(out, r.method+" "+r.pattern)
	}
	slices.Sort(out)
	return out
}

func (a *api) health(w http.ResponseWriter, _ *http.Request, _ *principal) {
	cfg := a.d.Config
	writeJSON(w, http.StatusOK, map[string]any{
		"status": "ok", "instance": cfg.Instance, "roles": cfg.EffectiveRoles(), "version": a.d.Version,
	})
}

func (a *api) ready(w http.ResponseWriter, _ *http.Request, _ *principal) {
	ok, body := a.d.Ready(time.Now())
	if !ok {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}
