package admin

import "net/http"

// Error codes of the admin API's JSON bodies {"error": code, ...} (inventory A.5).
const (
	codeUnauthorized     = "unauthorized"       // 401: no credentials, or a token no principal holds
	codeForbidden        = "forbidden"          // 403: the principal lacks the scope (body names it) or the tenant
	codeNotFound         = "not_found"          // 404: no such route, job or entry
	codeInvalidFilter    = "invalid_filter"     // 400: a query parameter or body field is malformed (body names it)
	codeInvalidTenant    = "invalid_tenant"     // 400: a tenant id outside [A-Za-z0-9_-]{1,64}
	codeRoleNotEnabled   = "role_not_enabled"   // 409: the node does not run the role the route needs (body names it)
	codeWALDisabled      = "wal_disabled"       // 409: wal.type none keeps no store
	codeLifecycleOff     = "lifecycle_disabled" // 409: no lifecycle.sinks, so no lifecycle event to replay
	codeStoreUnavailable = "store_unavailable"  // 503 + Retry-After: 1: the store is closed or failed
	codeConflict         = "conflict"           // 409: the object is in a state the change cannot apply to
)

// writeError answers status with {"error": code} plus the fields of extra (never a caller's raw value
// beyond the name of the field that was wrong).
func writeError(w http.ResponseWriter, status int, code string, extra map[string]any) {
	body := map[string]any{"error": code}
	for k, v := range extra {
		body[k] = v
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, body)
}
