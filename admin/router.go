package admin

import (
	"net/http"
	"time"
)

// route is one endpoint the router serves; the table is what the OpenAPI test compares the document with.
type route struct {
	method, pattern string
	handler         http.HandlerFunc
}

// routes lists every endpoint, in the order of the API document.
func routes(d *Deps) []route {
	return []route{
		{"GET", "/health", func(w http.ResponseWriter, _ *http.Request) {
			cfg := d.Config
			writeJSON(w, http.StatusOK, map[string]any{
				"status": "ok", "instance": cfg.Instance, "roles": cfg.EffectiveRoles(), "version": d.Version,
			})
		}},
		{"GET", "/ready", func(w http.ResponseWriter, _ *http.Request) {
			ok, body := d.Ready(time.Now())
			if !ok {
				w.Header().Set("Retry-After", "1")
				writeJSON(w, http.StatusServiceUnavailable, body)
				return
			}
			writeJSON(w, http.StatusOK, body)
		}},
		{"GET", "/metrics", d.Metrics.ServeHTTP},
	}
}

// NewRouter returns the admin API's handler.
func NewRouter(d *Deps) http.Handler {
	mux := http.NewServeMux()
	for _, r := range routes(d) {
		mux.HandleFunc(r.method+" "+r.pattern, r.handler)
	}
	return mux
}
