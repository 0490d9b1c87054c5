package admin

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/ankusa-go/ankusa/store"
)

// Audit rows of the admin API's changes (inventory G.6). A change that lives in this node's store commits
// with its row (store.DB.Audited); one that lives elsewhere (the log level, a Redis source) writes its row
// first and is made only when the row is written, so a change whose row cannot be written is refused 503.

// requestIDHeader carries the caller's request id; without one the router draws one and echoes it.
const requestIDHeader = "X-Request-Id"

// requestID returns the request's id (the caller's when it is short and printable), setting it on the answer.
func requestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get(requestIDHeader)
	if id == "" || len(id) > 128 || !printable(id) {
		id = uuid.NewString()
	}
	w.Header().Set(requestIDHeader, id)
	return id
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// entry is the audit entry of a change p makes through r: who, from where, which request.
func entry(w http.ResponseWriter, r *http.Request, p *principal, action, subject, tenant string) store.AuditEntry {
	return store.AuditEntry{Actor: p.name, Client: r.RemoteAddr, RequestID: requestID(w, r), Action: action,
		Subject: subject, Tenant: tenant}
}

// auditFailed answers a refused audited change: 503 store_unavailable (the row could not be written, so the
// change was not made).
func (a *api) auditFailed(w http.ResponseWriter, what string, err error) {
	a.d.Log.Error().Err(err).Str("admin_route", what).Msg("admin change refused: its audit row cannot be written")
	writeError(w, http.StatusServiceUnavailable, codeStoreUnavailable, nil)
}

// record commits the row of a change made outside the store (no keys of its own) before the change is made;
// false once the refusal is written (no store: 409/503, the row failed: 503). A no-op (ErrNoChange) is true
// with no row.
func (a *api) record(w http.ResponseWriter, what string, e store.AuditEntry) bool {
	db := a.db(w)
	if db == nil {
		return false
	}
	if _, err := db.CommitAudited(e); err != nil && !errors.Is(err, store.ErrNoChange) {
		a.auditFailed(w, what, err)
		return false
	}
	return true
}

// external makes a change whose state the store does not hold (a replay job the dispatcher keeps, the pen a
// release commits from, the log level): a synced pending row, the change, then the row finished ok or
// failed. A row that cannot be written refuses the change (503, false); change's error is returned as is,
// with the row finished failed.
func (a *api) external(w http.ResponseWriter, what string, e store.AuditEntry, change func() error) (bool, error) {
	db := a.db(w)
	if db == nil {
		return false, nil
	}
	row, err := db.BeginAudit(e)
	if errors.Is(err, store.ErrNoChange) {
		return true, change()
	}
	if err != nil {
		a.auditFailed(w, what, err)
		return false, nil
	}
	cerr := change()
	status := store.AuditOK
	if cerr != nil {
		status = store.AuditFailed
	}
	if _, err := db.FinishAudit(row, status); err != nil {
		// The change is made (or not) already; the next boot settles the pending row.
		a.d.Log.Error().Err(err).Uint64("audit_seq", row.Seq).Msg("audit row left pending")
	}
	return true, cerr
}

func auditJSON(r store.AuditRow) map[string]any {
	m := map[string]any{
		"seq": r.Seq, "at": r.At, "actor": r.Actor, "client": r.Client, "request_id": r.RequestID,
		"action": r.Action, "subject": r.Subject, "revision": r.Revision, "status": r.Status,
		"before_hash": r.BeforeHash, "after_hash": r.AfterHash,
	}
	if r.Tenant != "" {
		m["tenant_id"] = r.Tenant
	}
	return m
}

// listAudit is GET /v1/audit?after=&limit=&tenant_id=&subject=: rows in commit order after the cursor (a seq),
// a tenant-scoped reader seeing only its tenants' rows; next_cursor is the last seq of a full page.
func (a *api) listAudit(w http.ResponseWriter, r *http.Request, p *principal) {
	q := newQuery(r)
	f := store.AuditFilter{After: uint64(q.int("after", 0)), Subject: q.v.Get("subject")}
	if c := q.v.Get("cursor"); c != "" {
		n, err := strconv.ParseUint(c, 10, 64)
		if err != nil {
			q.fail("cursor")
		}
		f.After = n
	}
	limit := q.limit(defaultListLimit, maxListLimit)
	if len(f.Subject) > 200 {
		q.fail("subject")
	}
	if q.bad != "" {
		badParam(w, q.bad)
		return
	}
	tenant, ok := tenantParam(w, q, p)
	if !ok {
		return
	}
	f.Tenant, f.Tenants = tenant, p.visible()
	db := a.db(w)
	if db == nil {
		return
	}
	rows, err := db.ListAudit(f, limit)
	if err != nil {
		a.failed(w, "audit", err)
		return
	}
	entries := make([]map[string]any, 0, len(rows))
	for _, row := range rows {
		entries = append(entries, auditJSON(row))
	}
	body := map[string]any{"entries": entries}
	if len(rows) == limit && limit > 0 {
		body["next_cursor"] = strconv.FormatUint(rows[len(rows)-1].Seq, 10)
	}
	writeJSON(w, http.StatusOK, body)
}
