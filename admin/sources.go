package admin

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sources"
	"github.com/ankusa-go/ankusa/store"
)

// Source error codes (inventory A.5).
const (
	codeInvalidSource       = "invalid_source"         // 400: the spec is refused (problems name the keys)
	codeSourceNotFound      = "source_not_found"       // 404
	codeSourceExists        = "source_exists"          // 409: the source id is another tenant's
	codeSourceStoreReadOnl  = "source_store_read_only" // 409: a static store, or a source the file defines
	codeSourceHasDeliveries = "source_has_deliveries"  // 409: rows still to deliver (body: pending, inflight)
)

// pathTenant reads {tenant}: 400 invalid_tenant when malformed, 403 when p may not see it.
func pathTenant(w http.ResponseWriter, r *http.Request, p *principal) (string, bool) {
	t := r.PathValue("tenant")
	if !validID(t) {
		writeError(w, http.StatusBadRequest, codeInvalidTenant, nil)
		return "", false
	}
	if !p.sees(t) {
		writeError(w, http.StatusForbidden, codeForbidden, map[string]any{"tenant": t})
		return "", false
	}
	return t, true
}

// sourceSet returns the node's sources, or answers 503 when the instance gave none.
func (a *api) sourceSet(w http.ResponseWriter) *sources.Set {
	if a.d.Sources == nil {
		writeError(w, http.StatusServiceUnavailable, codeStoreUnavailable, nil)
	}
	return a.d.Sources
}

// sourceJSON is the source resource: redacted, never a secret.
func (a *api) sourceJSON(e sources.Entry) map[string]any {
	cfg := a.d.Config
	prefix := strings.TrimSuffix(cfg.HTTP.Prefix, "/")
	path := prefix + "/" + e.Name
	if cfg.HTTP.Routing == "tenant_path" {
		path = prefix + "/" + e.Tenant + "/" + e.Name
	}
	store := a.d.Sources.Kind()
	if e.Static {
		store = sources.KindStatic
	}
	return map[string]any{"tenant": e.Tenant, "name": e.Name, "source_id": e.Name, "ingest_path": path,
		"store": store, "spec": config.RedactedSource(e.Source)}
}

// sourceFailed answers a source store error.
func (a *api) sourceFailed(w http.ResponseWriter, what string, err error) {
	var cerr *config.Error
	var busy *store.SourceHasDeliveriesError
	switch {
	case errors.As(err, &busy):
		writeError(w, http.StatusConflict, codeSourceHasDeliveries, map[string]any{"pending": busy.Pending, "inflight": busy.Inflight})
	case errors.As(err, &cerr):
		problems := make([]map[string]any, 0, len(cerr.Problems))
		for _, p := range cerr.Problems {
			problems = append(problems, map[string]any{"path": p.Path, "message": p.Msg})
		}
		writeError(w, http.StatusBadRequest, codeInvalidSource, map[string]any{"problems": problems})
	case errors.Is(err, sources.ErrReadOnly):
		writeError(w, http.StatusConflict, codeSourceStoreReadOnl, nil)
	case errors.Is(err, sources.ErrNotFound):
		writeError(w, http.StatusNotFound, codeSourceNotFound, nil)
	case errors.Is(err, sources.ErrExists):
		writeError(w, http.StatusConflict, codeSourceExists, nil)
	default:
		a.auditFailed(w, what, err)
	}
}

func (a *api) listSources(w http.ResponseWriter, r *http.Request, p *principal) {
	tenant, ok := pathTenant(w, r, p)
	if !ok {
		return
	}
	set := a.sourceSet(w)
	if set == nil {
		return
	}
	all, err := set.List(tenant)
	if err != nil {
		a.failed(w, "list sources", err)
		return
	}
	out := make([]map[string]any, 0, len(all))
	for _, e := range all {
		out = append(out, a.sourceJSON(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"sources": out})
}

// sourceParams reads {tenant} and {name} and the source set; false once the refusal is written.
func (a *api) sourceParams(w http.ResponseWriter, r *http.Request, p *principal) (string, string, *sources.Set, bool) {
	tenant, ok := pathTenant(w, r, p)
	if !ok {
		return "", "", nil, false
	}
	name := r.PathValue("name")
	if !validID(name) {
		badParam(w, "name")
		return "", "", nil, false
	}
	set := a.sourceSet(w)
	return tenant, name, set, set != nil
}

func (a *api) getSource(w http.ResponseWriter, r *http.Request, p *principal) {
	tenant, name, set, ok := a.sourceParams(w, r, p)
	if !ok {
		return
	}
	e, err := set.Get(tenant, name)
	if err != nil {
		a.sourceFailed(w, "get source", err)
		return
	}
	writeJSON(w, http.StatusOK, a.sourceJSON(e))
}

// putSource creates (201) or replaces (200) tenant's source name with the body, validated as the file's
// sources are; the same spec again is 200 with no audit row.
func (a *api) putSource(w http.ResponseWriter, r *http.Request, p *principal) {
	tenant, name, set, ok := a.sourceParams(w, r, p)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		badParam(w, "body")
		return
	}
	c := sources.Change{Audit: entry(w, r, p, "", "", tenant), Lifecycle: a.d.Lifecycle}
	row, err := set.Put(c, tenant, name, body)
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		a.sourceFailed(w, "put source", err)
		return
	}
	e, gerr := set.Get(tenant, name)
	if gerr != nil {
		a.sourceFailed(w, "put source", gerr)
		return
	}
	status := http.StatusOK
	if row.Action == "source.create" {
		status = http.StatusCreated
	}
	out := a.sourceJSON(e)
	if row.Seq != 0 {
		out["revision"], out["audit_seq"] = row.Revision, row.Seq
		a.changed(r, p, row.Action).Str("tenant", tenant).Str("source", name).Msg("admin change")
	}
	writeJSON(w, status, out)
}

// deleteSource deletes tenant's source name: refused (409 source_has_deliveries) while it has delivery rows
// waiting or in flight, unless ?deliveries=dead_letter, which dead-letters them ({source_gone, name}).
func (a *api) deleteSource(w http.ResponseWriter, r *http.Request, p *principal) {
	tenant, name, set, ok := a.sourceParams(w, r, p)
	if !ok {
		return
	}
	deadLetter := false
	if v, given := r.URL.Query()["deliveries"]; given {
		if len(v) != 1 || v[0] != "dead_letter" {
			badParam(w, "deliveries")
			return
		}
		deadLetter = true
	}
	c := sources.Change{Audit: entry(w, r, p, "", "", tenant), Lifecycle: a.d.Lifecycle, DeadLetter: deadLetter}
	if _, err := set.Delete(c, tenant, name); err != nil {
		a.sourceFailed(w, "delete source", err)
		return
	}
	a.changed(r, p, "source.delete").Str("tenant", tenant).Str("source", name).Msg("admin change")
	w.WriteHeader(http.StatusNoContent)
}
