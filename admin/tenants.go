package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ankusa-go/ankusa/store"
)

// EraseStatus is a tenant erase job as DELETE /v1/tenants/{tenant} answers it.
type EraseStatus struct {
	Tenant    string `json:"tenant"`
	State     string `json:"state"` // running, erased, failed
	Stage     string `json:"stage,omitempty"`
	StartedAt int64  `json:"started_at,omitempty"`
}

// eraseWait is how long DELETE /v1/tenants/{tenant} waits for its job before answering 202 running.
const eraseWait = 20 * time.Second

// eraseTenant starts (or joins) the erase of a tenant: tenants:write over every tenant, and ?confirm= naming
// the tenant again. 200 {state: erased} once its tombstone is committed, 202 {state: running} while the job
// runs on (a repeated DELETE joins it).
func (a *api) eraseTenant(w http.ResponseWriter, r *http.Request, p *principal) {
	tenant := r.PathValue("tenant")
	if !validID(tenant) {
		writeError(w, http.StatusBadRequest, codeInvalidTenant, nil)
		return
	}
	if !allTenants(w, p) {
		return
	}
	if r.URL.Query().Get("confirm") != tenant {
		badParam(w, "confirm")
		return
	}
	if a.db(w) == nil {
		return
	}
	if a.d.EraseTenant == nil {
		writeError(w, http.StatusConflict, codeRoleNotEnabled, map[string]any{"role": "storage"})
		return
	}
	e := entry(w, r, p, "tenant.delete", "tenant:"+tenant, tenant)
	ctx, cancel := context.WithTimeout(r.Context(), eraseWait)
	defer cancel()
	st, err := a.d.EraseTenant(ctx, tenant, e, eraseWait)
	switch {
	case errors.Is(err, store.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, codeStoreUnavailable, nil)
		return
	case err != nil:
		a.failed(w, "tenants.erase", err)
		return
	}
	a.changed(r, p, "tenant.erase").Str("tenant", tenant).Str("state", st.State).Msg("tenant erase")
	status := http.StatusOK
	if st.State != "erased" {
		status = http.StatusAccepted
	}
	writeJSON(w, status, st)
}
