package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"sort"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
)

// Runtime rate-limit overrides (inventory A.5): a tenant's hooks/s limit set through the API wins over its
// rate_limits.tenants entry and rate_limits.default. An override is persisted in the store with its audit
// row in one synced batch, applied to the edge's limiter at once (its bucket reset) and loaded at boot.

// codeInvalidRateLimit is a refused override body: 400 {error, field}.
const codeInvalidRateLimit = "invalid_rate_limit"

// Sources of an effective limit.
const (
	limitOverride = "override"
	limitConfig   = "config"
	limitDefault  = "default"
	limitNone     = "none"
)

// rateSpec is the override's body and stored form (canonical JSON).
type rateSpec struct {
	Rate  *float64 `json:"rate"`
	Burst *float64 `json:"burst"`
}

// parseRate reads an override body: an object with rate > 0 and burst >= 1, both required, nothing else.
// It returns the canonical stored form, or the field that is wrong.
func parseRate(body []byte) (config.Rate, []byte, string) {
	var s rateSpec
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil || dec.More() {
		return config.Rate{}, nil, "body"
	}
	switch {
	case s.Rate == nil || !(*s.Rate > 0) || math.IsInf(*s.Rate, 1):
		return config.Rate{}, nil, "rate"
	case s.Burst == nil || !(*s.Burst >= 1) || math.IsInf(*s.Burst, 1):
		return config.Rate{}, nil, "burst"
	}
	r := config.Rate{Rate: *s.Rate, Burst: *s.Burst}
	spec, err := json.Marshal(rateSpec{Rate: &r.Rate, Burst: &r.Burst})
	if err != nil {
		return config.Rate{}, nil, "body"
	}
	return r, spec, ""
}

// DecodeRateOverride reads a stored override (store.ListRateLimits); the instance loads them at boot.
func DecodeRateOverride(spec []byte) (config.Rate, error) {
	r, _, field := parseRate(spec)
	if field != "" {
		return config.Rate{}, errors.New("admin: stored rate-limit override: malformed " + field)
	}
	return r, nil
}

func rateSubject(tenant string) string { return "rate_limit:" + tenant }

func rateJSON(tenant string, r config.Rate, source string) map[string]any {
	m := map[string]any{"tenant": tenant, "source": source, "rate": nil, "burst": nil}
	if source != limitNone {
		m["rate"], m["burst"] = r.Rate, r.Burst
	}
	return m
}

// overrides reads every stored override (nil and false once the refusal is written).
func (a *api) overrides(w http.ResponseWriter) (map[string]config.Rate, bool) {
	db := a.db(w)
	if db == nil {
		return nil, false
	}
	rows, err := db.ListRateLimits()
	if err != nil {
		a.failed(w, "list rate limits", err)
		return nil, false
	}
	out := make(map[string]config.Rate, len(rows))
	for _, row := range rows {
		r, err := DecodeRateOverride(row.Spec)
		if err != nil {
			a.failed(w, "list rate limits", err)
			return nil, false
		}
		out[row.Tenant] = r
	}
	return out, true
}

// effective is tenant's hooks/s limit and where it comes from: override > config entry > default > none.
func (a *api) effective(tenant string, ov map[string]config.Rate) (config.Rate, string) {
	rl := &a.d.Config.RateLimits
	if r, ok := ov[tenant]; ok {
		return r, limitOverride
	}
	if t, ok := rl.Tenants[tenant]; ok && t.Rate > 0 {
		return config.Rate{Rate: t.Rate, Burst: t.Burst}, limitConfig
	}
	if rl.Default != nil {
		return *rl.Default, limitDefault
	}
	return config.Rate{}, limitNone
}

// edgeRates refuses (409 role_not_enabled) a node without the edge: it has no limiter to apply to.
func (a *api) edgeRates(w http.ResponseWriter) bool {
	if a.d.RateOverride == nil {
		writeError(w, http.StatusConflict, codeRoleNotEnabled, map[string]any{"role": config.RoleEdge})
		return false
	}
	return true
}

// listRateLimits is GET /v1/rate-limits: the configured default, and every tenant the config names or an
// override holds with its effective limit (override wins), sorted by tenant; a tenant-scoped principal sees
// its tenants only.
func (a *api) listRateLimits(w http.ResponseWriter, _ *http.Request, p *principal) {
	if !a.edgeRates(w) {
		return
	}
	ov, ok := a.overrides(w)
	if !ok {
		return
	}
	names := map[string]bool{}
	for t := range a.d.Config.RateLimits.Tenants {
		names[t] = true
	}
	for t := range ov {
		names[t] = true
	}
	sorted := make([]string, 0, len(names))
	for t := range names {
		if p.sees(t) {
			sorted = append(sorted, t)
		}
	}
	sort.Strings(sorted)
	tenants := make([]map[string]any, 0, len(sorted))
	for _, t := range sorted {
		r, src := a.effective(t, ov)
		tenants = append(tenants, rateJSON(t, r, src))
	}
	var def any
	if d := a.d.Config.RateLimits.Default; d != nil {
		def = map[string]any{"rate": d.Rate, "burst": d.Burst}
	}
	writeJSON(w, http.StatusOK, map[string]any{"default": def, "tenants": tenants})
}

// getRateLimit is GET /v1/tenants/{tenant}/rate-limit: the effective limit and its source.
func (a *api) getRateLimit(w http.ResponseWriter, r *http.Request, p *principal) {
	tenant, ok := pathTenant(w, r, p)
	if !ok || !a.edgeRates(w) {
		return
	}
	ov, ok := a.overrides(w)
	if !ok {
		return
	}
	lim, src := a.effective(tenant, ov)
	writeJSON(w, http.StatusOK, rateJSON(tenant, lim, src))
}

// putRateLimit is PUT /v1/tenants/{tenant}/rate-limit {rate, burst}: sets the override, committed with its
// audit row, then applied to the edge (its bucket reset). The same override again is 200 with no row.
func (a *api) putRateLimit(w http.ResponseWriter, r *http.Request, p *principal) {
	tenant, ok := pathTenant(w, r, p)
	if !ok || !a.edgeRates(w) {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidRateLimit, map[string]any{"field": "body"})
		return
	}
	lim, spec, field := parseRate(body)
	if field != "" {
		writeError(w, http.StatusBadRequest, codeInvalidRateLimit, map[string]any{"field": field})
		return
	}
	db := a.db(w)
	if db == nil {
		return
	}
	e := entry(w, r, p, "", rateSubject(tenant), tenant)
	row, err := db.Audited(func(get store.AuditReader) (store.AuditEntry, []store.AuditOp, error) {
		prev, err := get(store.RateLimitKey(tenant))
		if err != nil {
			return store.AuditEntry{}, nil, err
		}
		e.Action = "rate_limit.update"
		if prev == nil {
			e.Action = "rate_limit.create"
		}
		e.Before, e.After = prev, spec
		return e, []store.AuditOp{{Key: store.RateLimitKey(tenant), Value: spec}}, nil
	})
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		a.auditFailed(w, "put rate limit", err)
		return
	}
	out := rateJSON(tenant, lim, limitOverride)
	if row.Seq != 0 {
		a.d.RateOverride(tenant, &lim)
		out["revision"], out["audit_seq"] = row.Revision, row.Seq
		a.changed(r, p, row.Action).Str("tenant", tenant).Msg("admin change")
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteRateLimit is DELETE /v1/tenants/{tenant}/rate-limit: removes the override (204, its bucket reset);
// 404 not_found when the tenant has none.
func (a *api) deleteRateLimit(w http.ResponseWriter, r *http.Request, p *principal) {
	tenant, ok := pathTenant(w, r, p)
	if !ok || !a.edgeRates(w) {
		return
	}
	db := a.db(w)
	if db == nil {
		return
	}
	errNone := errors.New("no override")
	e := entry(w, r, p, "rate_limit.delete", rateSubject(tenant), tenant)
	_, err := db.Audited(func(get store.AuditReader) (store.AuditEntry, []store.AuditOp, error) {
		prev, err := get(store.RateLimitKey(tenant))
		if err != nil {
			return store.AuditEntry{}, nil, err
		}
		if prev == nil {
			return store.AuditEntry{}, nil, errNone
		}
		e.Before = prev
		return e, []store.AuditOp{{Key: store.RateLimitKey(tenant), Delete: true}}, nil
	})
	switch {
	case errors.Is(err, errNone):
		writeError(w, http.StatusNotFound, codeNotFound, nil)
		return
	case err != nil:
		a.auditFailed(w, "delete rate limit", err)
		return
	}
	a.d.RateOverride(tenant, nil)
	a.changed(r, p, "rate_limit.delete").Str("tenant", tenant).Msg("admin change")
	w.WriteHeader(http.StatusNoContent)
}
