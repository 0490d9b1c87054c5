package admin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"net/url"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/routes"
	"github.com/ankusa-go/ankusa/routes/registry"
	"github.com/ankusa-go/ankusa/store"
)

// Route management (inventory A.6), served on this authenticated listener rather than on an unauthenticated
// port of its own: /v1/routes CRUD, the dry run POST /v1/routes/test and the global rules /v1/ip-rules. A
// route with a tenant is seen and changed only by principals that see the tenant; a route without one (the
// node's), the global rules and the dry run (which reads every route) need a principal of every tenant.

// Route error codes.
const (
	codeInvalidRoute   = "invalid_route"    // 400 {field, message}
	codeInvalidIPRules = "invalid_ip_rules" // 400 {field}
	codeRouteNotFound  = "route_not_found"  // 404
	codeRouteExists    = "route_exists"     // 409: the id is taken
	codeRouteConflict  = "route_conflict"   // 409 {method, route_id}: an enabled route has the path and method
	codeRouteLimit     = "route_limit"      // 409 {limit}: routes.max_routes
)

// routeRegistry returns the node's routes, or answers 409 role_not_enabled on a node without the edge.
func (a *api) routeRegistry(w http.ResponseWriter) *registry.Registry {
	if a.d.Routes == nil {
		writeError(w, http.StatusConflict, codeRoleNotEnabled, map[string]any{"role": config.RoleEdge})
	}
	return a.d.Routes
}

// routeChange is p's change through r: its audit entry and the tenants p sees (a node route, tenant "",
// only for a principal of every tenant).
func routeChange(w http.ResponseWriter, r *http.Request, p *principal) registry.Change {
	return registry.Change{Audit: entry(w, r, p, "", "", ""), Sees: func(t string) bool {
		if t == "" {
			return p.allTenants
		}
		return p.sees(t)
	}}
}

// everyTenant refuses (403) a principal that does not see every tenant.
func everyTenant(w http.ResponseWriter, p *principal) bool {
	if !p.allTenants {
		writeError(w, http.StatusForbidden, codeForbidden, map[string]any{"tenant": "*"})
		return false
	}
	return true
}

// routeFailed answers a refused route change.
func (a *api) routeFailed(w http.ResponseWriter, p *principal, what string, err error) {
	var fe *routes.FieldError
	var ce *routes.ConflictError
	switch {
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, codeInvalidRoute, map[string]any{"field": fe.Field, "message": fe.Msg})
	case errors.As(err, &ce):
		extra := map[string]any{"method": ce.Method}
		if other := a.d.Routes.Snapshot().Get(ce.A); other != nil && (other.Tenant == "" && p.allTenants || other.Tenant != "" && p.sees(other.Tenant)) {
			extra["route_id"] = ce.A
		}
		writeError(w, http.StatusConflict, codeRouteConflict, extra)
	case errors.Is(err, registry.ErrNotFound):
		writeError(w, http.StatusNotFound, codeRouteNotFound, nil)
	case errors.Is(err, registry.ErrExists):
		writeError(w, http.StatusConflict, codeRouteExists, nil)
	case errors.Is(err, registry.ErrLimit):
		writeError(w, http.StatusConflict, codeRouteLimit, map[string]any{"limit": a.d.Config.Routes.MaxRoutes})
	case errors.Is(err, registry.ErrForbidden):
		writeError(w, http.StatusForbidden, codeForbidden, map[string]any{"field": "tenant"})
	case errors.Is(err, registry.ErrUnavailable) && a.d.Config.WAL.Type == config.WALNone:
		writeError(w, http.StatusConflict, codeWALDisabled, nil)
	default:
		a.auditFailed(w, what, err)
	}
}

// routeBody is a route resource: its public form, and the audit row of the change that made it.
func routeBody(rt *routes.Route, row store.AuditRow) map[string]any {
	b, _ := json.Marshal(rt.View())
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if row.Seq != 0 {
		m["audit_seq"] = row.Seq
	}
	return m
}

// routeID reads {id}: a lowercase slug, else 400 invalid_route.
func routeID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !routes.ValidID(id) {
		writeError(w, http.StatusBadRequest, codeInvalidRoute, map[string]any{"field": "id",
			"message": "must be a lowercase slug [a-z0-9][a-z0-9_-]{0,63}"})
		return "", false
	}
	return id, true
}

// routeTarget is the registry and the route id of a /v1/routes/{id} request, or false once it answered 409
// (no edge role) or 400 (a malformed id).
func (a *api) routeTarget(w http.ResponseWriter, r *http.Request) (*registry.Registry, string, bool) {
	reg := a.routeRegistry(w)
	if reg == nil {
		return nil, "", false
	}
	id, ok := routeID(w, r)
	return reg, id, ok
}

// listRoutes is GET /v1/routes?enabled=&limit=&cursor=: the routes p sees, id-ordered; next_cursor (opaque)
// is set when the page is full.
func (a *api) listRoutes(w http.ResponseWriter, r *http.Request, p *principal) {
	reg := a.routeRegistry(w)
	if reg == nil {
		return
	}
	q := newQuery(r)
	limit := q.limit(defaultListLimit, maxListLimit)
	var enabled *bool
	switch q.v.Get("enabled") {
	case "":
	case "true":
		t := true
		enabled = &t
	case "false":
		f := false
		enabled = &f
	default:
		q.fail("enabled")
	}
	after := ""
	if c := q.v.Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || !routes.ValidID(string(b)) {
			q.fail("cursor")
		}
		after = string(b)
	}
	if q.bad != "" {
		badParam(w, q.bad)
		return
	}
	c := routeChange(w, r, p)
	out := make([]map[string]any, 0, min(limit, 256))
	var last string
	for _, rt := range reg.Snapshot().List() {
		if len(out) == limit {
			break
		}
		if rt.ID <= after || !c.Sees(rt.Tenant) || enabled != nil && rt.Enabled != *enabled {
			continue
		}
		out = append(out, routeBody(rt, store.AuditRow{}))
		last = rt.ID
	}
	body := map[string]any{"routes": out}
	if len(out) == limit && limit > 0 {
		body["next_cursor"] = base64.RawURLEncoding.EncodeToString([]byte(last))
	}
	writeJSON(w, http.StatusOK, body)
}

func (a *api) getRoute(w http.ResponseWriter, r *http.Request, p *principal) {
	reg, id, ok := a.routeTarget(w, r)
	if !ok {
		return
	}
	rt, err := reg.Get(routeChange(w, r, p), id)
	if err != nil {
		a.routeFailed(w, p, "get route", err)
		return
	}
	writeJSON(w, http.StatusOK, routeBody(rt, store.AuditRow{}))
}

// createRoute is POST /v1/routes: 201, or 409 route_exists when the id is taken.
func (a *api) createRoute(w http.ResponseWriter, r *http.Request, p *principal) {
	reg := a.routeRegistry(w)
	if reg == nil {
		return
	}
	var s routes.Spec
	if err := decodeBody(w, r, &s); err != nil {
		badParam(w, "body")
		return
	}
	rt, row, err := reg.Create(routeChange(w, r, p), s)
	if err != nil {
		a.routeFailed(w, p, "create route", err)
		return
	}
	a.changed(r, p, row.Action).Str("route", rt.ID).Msg("admin change")
	writeJSON(w, http.StatusCreated, routeBody(rt, row))
}

// putRoute is PUT /v1/routes/{id}: creates (201) or replaces (200) the route; the body's id, when set, must
// be the path's. The same spec again is 200 with no audit row.
func (a *api) putRoute(w http.ResponseWriter, r *http.Request, p *principal) {
	reg, id, ok := a.routeTarget(w, r)
	if !ok {
		return
	}
	var s routes.Spec
	if err := decodeBody(w, r, &s); err != nil {
		badParam(w, "body")
		return
	}
	if s.ID != "" && s.ID != id {
		writeError(w, http.StatusBadRequest, codeInvalidRoute, map[string]any{"field": "id", "message": "must be the path's id"})
		return
	}
	s.ID = id
	rt, created, row, err := reg.Put(routeChange(w, r, p), s)
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		a.routeFailed(w, p, "put route", err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	if row.Seq != 0 {
		a.changed(r, p, row.Action).Str("route", id).Msg("admin change")
	}
	writeJSON(w, status, routeBody(rt, row))
}

// patchRoute is PATCH /v1/routes/{id}: methods, enabled, tenant, ip_rules and metadata (null clears the last
// two); id and path cannot change (400 invalid_route naming the field).
func (a *api) patchRoute(w http.ResponseWriter, r *http.Request, p *principal) {
	reg, id, ok := a.routeTarget(w, r)
	if !ok {
		return
	}
	var patch map[string]json.RawMessage
	if err := decodeBody(w, r, &patch); err != nil {
		badParam(w, "body")
		return
	}
	mutate := func(s *routes.Spec) error {
		for k, v := range patch {
			var err error
			switch k {
			case "id", "path":
				var cur string
				if json.Unmarshal(v, &cur) != nil || (k == "id" && cur != s.ID) || (k == "path" && cur != s.Path) {
					return &routes.FieldError{Field: k, Msg: "cannot change (delete the route and create another)"}
				}
			case "methods":
				s.Methods = nil
				err = json.Unmarshal(v, &s.Methods)
			case "enabled":
				s.Enabled = nil
				err = json.Unmarshal(v, &s.Enabled)
			case "tenant":
				s.Tenant = ""
				err = json.Unmarshal(v, &s.Tenant)
			case "ip_rules":
				s.IPRules = nil
				err = strictJSON(v, &s.IPRules)
			case "metadata":
				s.Metadata = nil
				err = json.Unmarshal(v, &s.Metadata)
			default:
				return &routes.FieldError{Field: k, Msg: "is not a route field"}
			}
			if err != nil {
				return &routes.FieldError{Field: k, Msg: "is malformed"}
			}
		}
		return nil
	}
	rt, row, err := reg.Update(routeChange(w, r, p), id, mutate)
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		a.routeFailed(w, p, "patch route", err)
		return
	}
	if row.Seq != 0 {
		a.changed(r, p, row.Action).Str("route", id).Msg("admin change")
	}
	writeJSON(w, http.StatusOK, routeBody(rt, row))
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (a *api) deleteRoute(w http.ResponseWriter, r *http.Request, p *principal) {
	reg, id, ok := a.routeTarget(w, r)
	if !ok {
		return
	}
	if _, err := reg.Delete(routeChange(w, r, p), id); err != nil {
		a.routeFailed(w, p, "delete route", err)
		return
	}
	a.changed(r, p, "route.delete").Str("route", id).Msg("admin change")
	w.WriteHeader(http.StatusNoContent)
}

// testRequest is the dry run's body.
type testRequest struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	IP     string `json:"ip"`
}

// testRoute is POST /v1/routes/test {method, path, ip}: what the guard decides for that request now, against
// the published table, with nothing counted or logged. path is as the edge sees it once percent-decoded.
func (a *api) testRoute(w http.ResponseWriter, r *http.Request, p *principal) {
	reg := a.routeRegistry(w)
	if reg == nil || !everyTenant(w, p) {
		return
	}
	var t testRequest
	if err := decodeBody(w, r, &t); err != nil {
		badParam(w, "body")
		return
	}
	ip, err := netip.ParseAddr(t.IP)
	path, perr := url.PathUnescape(t.Path)
	switch {
	case t.Method == "" || len(t.Method) > 16 || !printable(t.Method):
		badParam(w, "method")
		return
	case perr != nil || path == "" || path[0] != '/' || len(path) > 8192:
		badParam(w, "path")
		return
	case err != nil || ip.Zone() != "":
		badParam(w, "ip")
		return
	}
	d := reg.Snapshot().Decide([]byte(t.Method), []byte(path), ip)
	out := map[string]any{"decision": "reject", "reason": d.Reason, "route_id": nil, "ip_rule": nil}
	if d.Allow {
		out["decision"] = "allow"
	} else {
		status := http.StatusNotFound
		if d.Reason == routes.ReasonIPDenied && a.d.Config.Routes.IPDeniedStatus == http.StatusForbidden {
			status = http.StatusForbidden
		}
		out["status"] = status
	}
	if d.Route != nil {
		out["route_id"] = d.Route.ID
	}
	if d.Rule.Scope != "" {
		out["ip_rule"] = d.Rule
	}
	out["guard_enabled"] = a.d.Config.Routes.Enabled
	writeJSON(w, http.StatusOK, out)
}

func (a *api) getIPRules(w http.ResponseWriter, _ *http.Request, _ *principal) {
	reg := a.routeRegistry(w)
	if reg == nil {
		return
	}
	writeJSON(w, http.StatusOK, reg.Snapshot().Global())
}

// putIPRules is PUT /v1/ip-rules {default, rules}: both keys required (400 invalid_ip_rules naming the one
// missing or wrong). The same rules again are 200 with no audit row.
func (a *api) putIPRules(w http.ResponseWriter, r *http.Request, p *principal) {
	reg := a.routeRegistry(w)
	if reg == nil || !everyTenant(w, p) {
		return
	}
	var raw map[string]json.RawMessage
	if err := decodeBody(w, r, &raw); err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidIPRules, map[string]any{"field": "body"})
		return
	}
	var s routes.RulesSpec
	for _, k := range []string{"default", "rules"} {
		v, ok := raw[k]
		if !ok || string(v) == "null" {
			writeError(w, http.StatusBadRequest, codeInvalidIPRules, map[string]any{"field": k})
			return
		}
	}
	for k := range raw {
		if k != "default" && k != "rules" {
			writeError(w, http.StatusBadRequest, codeInvalidIPRules, map[string]any{"field": k})
			return
		}
	}
	if json.Unmarshal(raw["default"], &s.Default) != nil {
		writeError(w, http.StatusBadRequest, codeInvalidIPRules, map[string]any{"field": "default"})
		return
	}
	if strictJSON(raw["rules"], &s.Rules) != nil {
		writeError(w, http.StatusBadRequest, codeInvalidIPRules, map[string]any{"field": "rules"})
		return
	}
	canon, row, err := reg.SetIPRules(routeChange(w, r, p), s)
	var fe *routes.FieldError
	switch {
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, codeInvalidIPRules, map[string]any{"field": fe.Field, "message": fe.Msg})
		return
	case err != nil && !errors.Is(err, store.ErrNoChange):
		a.routeFailed(w, p, "put ip rules", err)
		return
	}
	out := map[string]any{"default": canon.Default, "rules": canon.Rules}
	if row.Seq != 0 {
		out["audit_seq"] = row.Seq
		a.changed(r, p, row.Action).Int("rules", len(canon.Rules)).Msg("admin change")
	}
	writeJSON(w, http.StatusOK, out)
}
