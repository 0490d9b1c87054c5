package admin

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/ankusa-go/ankusa/storage"
	"github.com/ankusa-go/ankusa/store"
)

// codeGone: the hook's tenant was erased (410); its archived bytes are never served again.
const codeGone = "gone"

// fetchTimeout bounds an archive read of GET /v1/hooks/{id}.
const fetchTimeout = 10 * time.Second

// attemptClasses names store's attempt outcome classes in answers.
var attemptClasses = map[uint8]string{store.AttemptOK: "ok", store.AttemptTransient: "transient",
	store.AttemptPermanent: "permanent", store.AttemptTimeout: "timeout"}

// deliveryStates names store's delivery row states in answers.
var deliveryStates = map[uint8]string{store.StatePending: "pending", store.StateScheduled: "scheduled",
	store.StateDead: "dead"}

// getHook answers one hook by id: from the store while it is live (with its delivery rows), else from the
// archive. A principal that may not see the hook's tenant gets 404, as for an id nobody stored: whether
// another tenant's hook exists is not its business. An erased tenant's hook is 410 gone.
func (a *api) getHook(w http.ResponseWriter, r *http.Request, p *principal) {
	id, ok := parseID(r.PathValue("id"))
	if !ok {
		badParam(w, "id")
		return
	}
	db := a.db(w)
	if db == nil {
		return
	}
	f, err := db.FindHook(id)
	switch {
	case err == nil:
		if !p.sees(f.Hook.Tenant) {
			writeError(w, http.StatusNotFound, codeNotFound, nil)
			return
		}
		loc, archived, err := db.ArchiveLocationOf(id)
		if err != nil {
			a.failed(w, "hooks.get", err)
			return
		}
		var at *store.ArchiveLocation
		if archived {
			at = &loc
		}
		writeJSON(w, http.StatusOK, hookJSON(&f.Hook, "live", f.Seq, f.Rows, f.Delivered, at))
		return
	case !errors.Is(err, store.ErrNotFound):
		a.failed(w, "hooks.get", err)
		return
	}
	if a.d.FetchArchived == nil {
		writeError(w, http.StatusNotFound, codeNotFound, nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), fetchTimeout)
	defer cancel()
	h, err := a.d.FetchArchived(ctx, id)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, nil)
		return
	case errors.Is(err, storage.ErrGone):
		writeError(w, http.StatusGone, codeGone, nil)
		return
	case err != nil:
		a.failed(w, "hooks.get", err)
		return
	}
	if !p.sees(h.Tenant) {
		writeError(w, http.StatusNotFound, codeNotFound, nil)
		return
	}
	loc, _, err := db.ArchiveLocationOf(id)
	if err != nil {
		a.failed(w, "hooks.get", err)
		return
	}
	writeJSON(w, http.StatusOK, hookJSON(&h, "archived", 0, nil, nil, &loc))
}

// historyJSON is a delivery's last attempts, oldest first.
func historyJSON(h []store.Attempt) []map[string]any {
	out := make([]map[string]any, 0, len(h))
	for _, a := range h {
		m := map[string]any{"attempt": a.Number, "started_at": a.StartedAt, "latency_us": a.LatencyUS,
			"outcome": attemptClasses[a.Class]}
		if a.Status != 0 {
			m["status_code"] = a.Status
		}
		if a.Error != "" {
			m["error"] = a.Error
		}
		out = append(out, m)
	}
	return out
}

// hookJSON is a hook as the API shows it: metadata, the headers as stored (store_headers already applied at
// ingest), the body in base64, one attempt summary per sink (its row while it waits or is dead, its delivered
// record once delivered) and where the archive holds it.
func hookJSON(h *store.Hook, where string, seq uint64, rows []store.DeliveryRow, delivered []store.Delivered,
	loc *store.ArchiveLocation) map[string]any {
	headers := make([]map[string]string, 0, len(h.Headers))
	for _, x := range h.Headers {
		headers = append(headers, map[string]string{"name": x.Name, "value": x.Value})
	}
	attempts := make([]map[string]any, 0, len(rows))
	for _, d := range rows {
		m := map[string]any{"sink_index": d.SinkIndex, "sink_type": d.SinkType, "state": deliveryStates[d.State],
			"attempts": d.Attempts, "due_at": d.DueAt}
		if d.LastError != "" {
			m["last_error"] = d.LastError
		}
		if d.State == store.StateDead {
			m["dead_reason"], m["dead_at"] = d.DeadReason, d.DeadAt
		}
		if d.ReplayID != "" {
			m["replay_id"] = d.ReplayID
		}
		m["history"] = historyJSON(d.History)
		attempts = append(attempts, m)
	}
	for _, d := range delivered {
		m := map[string]any{"sink_index": d.SinkIndex, "sink_type": d.SinkType, "state": "delivered",
			"attempts": d.Attempts, "history": historyJSON(d.History)}
		if n := len(d.History); n > 0 {
			last := d.History[n-1]
			m["delivered_at"] = last.StartedAt + int64(last.LatencyUS)/1000
		}
		if d.ReplayID != "" {
			m["replay_id"] = d.ReplayID
		}
		attempts = append(attempts, m)
	}
	slices.SortStableFunc(attempts, func(a, b map[string]any) int {
		return cmp.Compare(a["sink_index"].(uint16), b["sink_index"].(uint16))
	})
	out := map[string]any{
		"id": uuid.UUID(h.ID).String(), "where": where, "tenant_id": h.Tenant, "source_id": h.Source,
		"received_at": h.ReceivedAt, "content_type": h.ContentType, "size": len(h.Body), "flagged": h.Flagged,
		"verification": h.Verification.String(), "dedupe_key": h.DedupeKey, "headers": headers,
		"body_base64": base64.StdEncoding.EncodeToString(h.Body), "deliveries": attempts, "archive": nil,
	}
	if seq != 0 {
		out["seq"] = seq
	}
	if loc != nil {
		out["archive"] = map[string]any{"segment_key": loc.SegmentKey, "offset": loc.Offset, "length": loc.Length}
	}
	return out
}
