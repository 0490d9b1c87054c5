package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ankusa-go/ankusa/admin"
	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
)

// bodyViewCap is how much of a stored body a page shows.
const bodyViewCap = 64 << 10

// pageSize is the rows of one list page.
const pageSize = 50

var funcs = template.FuncMap{
	"ms": func(v any) string {
		var n int64
		switch x := v.(type) {
		case int64:
			n = x
		case json.Number:
			n, _ = x.Int64()
		}
		if n <= 0 {
			return "—"
		}
		return time.UnixMilli(n).UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"deref": func(p *float64) float64 { return *p },
}

func (c *Console) sources(w http.ResponseWriter, r *http.Request, s *session) {
	a := c.call(r, s, "GET", "/v1/config", nil, nil)
	if !a.ok() {
		c.refused(w, r, s, "sources", a)
		return
	}
	visible, _ := a.body["sources"].(map[string]any)
	cfg := c.api.Config()
	counts := c.perSource()
	type sinkView struct{ Type, Target string }
	type row struct {
		ID, Tenant, Verify, OnFailure, Limit, Dedupe string
		Sinks                                        []sinkView
		Acked, Refused                               float64
		Health                                       string
	}
	var rows []row
	for id := range visible {
		src, ok := cfg.Sources[id]
		if !ok {
			continue
		}
		v := row{ID: id, Tenant: src.Tenant, Verify: cmpOr(src.Verify.Type, "none"),
			OnFailure: cmpOr(src.OnVerifyFailure, "reject"), Limit: rateOf(cfg, src.Tenant), Dedupe: "off"}
		if src.Dedupe != nil {
			v.Dedupe = "on"
		}
		for _, sk := range src.Sinks {
			v.Sinks = append(v.Sinks, sinkView{Type: sk.Type})
		}
		n := counts[id]
		v.Acked, v.Refused = n[0], n[1]
		v.Health = "ok"
		if n[1] > 0 && n[1] >= n[0] {
			v.Health = "refusing"
		}
		rows = append(rows, v)
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.ID, b.ID) })
	c.render(w, r, http.StatusOK, "sources", s, view{Title: "Sources", Active: "sources", Data: rows})
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// rateOf describes the ingest limit a tenant runs under.
func rateOf(cfg *config.Config, tenant string) string {
	if t, ok := cfg.RateLimits.Tenants[tenant]; ok && t.Rate > 0 {
		return fmt.Sprintf("%g/s (burst %g)", t.Rate, t.Burst)
	}
	if d := cfg.RateLimits.Default; d != nil {
		return fmt.Sprintf("%g/s (burst %g)", d.Rate, d.Burst)
	}
	return "unlimited"
}

type headerView struct{ Name, Value string }

type sinkState struct {
	Index              int
	Type, State, Error string
	Attempts           uint32
	DueAt, EndedAt     int64 // EndedAt: when it was dead-lettered, or delivered (from its record)
	ReplayID           string
}

// attemptView is one delivery attempt on the hook page, with the state its delivery is in now (delivered,
// dead-lettered, retrying, ...).
type attemptView struct {
	Sink            int
	Type            string
	Delivery        string
	Number          int64
	StartedAt       int64
	Latency         string
	Outcome, Status string
	Error           string
}

// attemptViews is every attempt the hook's deliveries remember (the rows of those waiting or dead, the records
// of those delivered), sink by sink, oldest first; states are the sinks' (sinkStates).
func attemptViews(rows []map[string]any, states []sinkState) []attemptView {
	var out []attemptView
	for _, row := range rows {
		i := int(num(row["sink_index"]))
		delivery := "unknown"
		if i >= 0 && i < len(states) {
			delivery = states[i].State
		}
		for _, a := range list(row["history"]) {
			v := attemptView{Sink: i, Type: str(row["sink_type"]), Delivery: delivery, Number: num(a["attempt"]),
				StartedAt: num(a["started_at"]), Latency: latency(num(a["latency_us"])),
				Outcome: cmpOr(str(a["outcome"]), "unknown"), Error: str(a["error"])}
			if code := num(a["status_code"]); code != 0 {
				v.Status = strconv.FormatInt(code, 10)
			}
			out = append(out, v)
		}
	}
	return out
}

// latency formats microseconds for reading: µs below a millisecond, ms with one decimal below a second, else s.
func latency(us int64) string {
	switch {
	case us < 1000:
		return strconv.FormatInt(us, 10) + " µs"
	case us < 1_000_000:
		return strconv.FormatFloat(float64(us)/1e3, 'f', 1, 64) + " ms"
	default:
		return strconv.FormatFloat(float64(us)/1e6, 'f', 2, 64) + " s"
	}
}

func (c *Console) hook(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query().Get("id")
	v := view{Title: "Hook", Active: "hooks"}
	if q == "" {
		c.render(w, r, http.StatusOK, "hook", s, v)
		return
	}
	id, err := uuid.Parse(strings.TrimSpace(q))
	if err != nil {
		v.Error = "That is not a hook id (a UUID such as 0190a8f0-7f3a-7b4c-8d5e-6f708192a3b4)."
		c.render(w, r, http.StatusBadRequest, "hook", s, v)
		return
	}
	a := c.call(r, s, "GET", "/v1/hooks/"+id.String(), nil, nil)
	switch {
	case a.status == http.StatusNotFound:
		// The API answers 404 alike for an id nobody stored and for another tenant's hook.
		v.Message = "No hook with this id that " + s.caller.Name() + " may see (the API answered 404 not_found)."
		v.Data = map[string]any{"ID": id.String()}
		c.render(w, r, http.StatusNotFound, "hook", s, v)
		return
	case !a.ok():
		c.refused(w, r, s, "hooks", a)
		return
	}
	h := a.body
	body, _ := base64.StdEncoding.DecodeString(str(h["body_base64"]))
	d := map[string]any{"ID": id.String(), "Found": true, "Where": h["where"], "Seq": h["seq"],
		"Tenant": h["tenant_id"], "Source": h["source_id"], "ReceivedAt": h["received_at"],
		"ContentType": h["content_type"], "Size": len(body), "Verification": cmpOr(str(h["verification"]), "unknown"),
		"Flagged": h["flagged"] == true, "DedupeKey": h["dedupe_key"], "Archive": h["archive"]}
	var hs []headerView
	for _, x := range list(h["headers"]) {
		hs = append(hs, headerView{str(x["name"]), str(x["value"])})
	}
	d["Headers"] = hs
	d["Body"], d["Pretty"], d["Truncated"], d["Binary"] = bodyView(body, str(h["content_type"]))
	if h["where"] == "live" {
		states := sinkStates(c.api.Config(), str(h["source_id"]), list(h["deliveries"]))
		d["Sinks"] = states
		d["Attempts"] = attemptViews(list(h["deliveries"]), states)
	}
	v.Data = d
	c.render(w, r, http.StatusOK, "hook", s, v)
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// list reads a JSON array of objects.
func list(v any) []map[string]any {
	xs, _ := v.([]any)
	out := make([]map[string]any, 0, len(xs))
	for _, x := range xs {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func num(v any) int64 {
	n, _ := v.(json.Number)
	i, _ := n.Int64()
	return i
}

// bodyView is the body as a page shows it: at most bodyViewCap bytes, JSON indented when it parses.
func bodyView(b []byte, contentType string) (text string, pretty, truncated, binary bool) {
	if len(b) <= bodyViewCap && (strings.Contains(contentType, "json") || json.Valid(b)) {
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") == nil {
			return out.String(), true, false, false
		}
	}
	if len(b) > bodyViewCap {
		b, truncated = b[:bodyViewCap], true
	}
	if !utf8.Valid(b) {
		return fmt.Sprintf("%d bytes of binary data", len(b)), false, truncated, true
	}
	return string(b), false, truncated, false
}

// sinkStates is each sink of the hook's source with the state of its delivery: a row still held tells it
// (pending, retrying, dead-lettered), a delivered record that it was delivered and when; a sink with neither
// was delivered before the store kept records.
func sinkStates(cfg *config.Config, source string, rows []map[string]any) []sinkState {
	n := len(cfg.Sources[source].Sinks)
	for _, row := range rows {
		n = max(n, int(num(row["sink_index"]))+1)
	}
	out := make([]sinkState, n)
	for i := range out {
		out[i] = sinkState{Index: i, State: "delivered"}
		if src, ok := cfg.Sources[source]; ok && i < len(src.Sinks) {
			out[i].Type = src.Sinks[i].Type
		}
	}
	for _, row := range rows {
		i := int(num(row["sink_index"]))
		if i < 0 || i >= n {
			continue
		}
		st := &out[i]
		st.Type, st.Attempts = cmpOr(str(row["sink_type"]), st.Type), uint32(num(row["attempts"]))
		st.Error, st.ReplayID = str(row["last_error"]), str(row["replay_id"])
		switch str(row["state"]) {
		case "pending":
			st.State, st.DueAt = "pending", num(row["due_at"])
		case "scheduled":
			st.State, st.DueAt = "retrying", num(row["due_at"])
		case "dead":
			st.State, st.EndedAt, st.Error = "dead-lettered", num(row["dead_at"]), cmpOr(str(row["dead_reason"]), st.Error)
		case "delivered":
			st.State, st.EndedAt = "delivered", num(row["delivered_at"])
		default:
			st.State = cmpOr(str(row["state"]), "unknown")
		}
	}
	return out
}

// sinceParam turns a datetime-local value (UTC) into unix ms, "" into 0.
func sinceParam(v string) (int64, bool) {
	if v == "" {
		return 0, true
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.UnixMilli(), true
		}
	}
	return 0, false
}

func (c *Console) dlq(w http.ResponseWriter, r *http.Request, s *session) {
	in := r.URL.Query()
	filter := map[string]string{"source_id": in.Get("source_id"), "tenant_id": in.Get("tenant_id"),
		"reason": in.Get("reason"), "since": in.Get("since")}
	q := url.Values{"limit": {strconv.Itoa(pageSize)}}
	for _, k := range []string{"source_id", "tenant_id", "reason", "cursor"} {
		if v := in.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	since, ok := sinceParam(filter["since"])
	if !ok {
		c.render(w, r, http.StatusBadRequest, "dlq", s, view{Title: "Dead letters", Active: "dlq",
			Error: "Since is not a time (YYYY-MM-DDTHH:MM, UTC).", Data: map[string]any{"Filter": filter}})
		return
	}
	if since > 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	a := c.call(r, s, "GET", "/v1/dlq", q, nil)
	if !a.ok() {
		c.refused(w, r, s, "dlq", a)
		return
	}
	d := map[string]any{"Filter": filter, "Total": a.body["total"], "Entries": a.body["entries"],
		"CanReplay": s.caller.AllTenants() && s.caller.Has(admin.ScopeReplaysWrite)}
	if next, _ := a.body["next_cursor"].(string); next != "" {
		d["Next"] = "/console/dlq?" + withFilter(url.Values{"cursor": {next}}, filter).Encode()
		entries, _ := a.body["entries"].([]any)
		d["Partial"] = len(entries) < pageSize
	}
	c.render(w, r, http.StatusOK, "dlq", s, view{Title: "Dead letters", Active: "dlq", Data: d})
}

// deadSel is one DLQ entry picked for replay: its source and the millisecond it was dead-lettered, the window
// of a dlq replay job that moves it.
type deadSel struct {
	Source string
	DeadAt int64
}

func (c *Console) dlqReplay(w http.ResponseWriter, r *http.Request, s *session) {
	var sel []deadSel
	var raw []string
	for _, v := range r.PostForm["sel"] {
		src, at, ok := strings.Cut(v, "|")
		n, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil || n <= 0 || src == "" {
			continue
		}
		if x := (deadSel{src, n}); !slices.Contains(sel, x) {
			sel, raw = append(sel, x), append(raw, v)
		}
	}
	if len(r.PostForm["sel"]) == 0 {
		c.render(w, r, http.StatusBadRequest, "error", s, view{Title: "Nothing selected", Active: "dlq",
			Message: "Select the dead letters to replay first."})
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.render(w, r, http.StatusOK, "confirm", s, view{Title: "Confirm replay", Active: "dlq", Data: map[string]any{
			"Count": len(r.PostForm["sel"]), "Sel": raw, "Windows": len(sel)}})
		return
	}
	created := 0
	for _, x := range sel {
		a := c.call(r, s, "POST", "/v1/replays", nil, map[string]any{"kind": "dlq", "source_id": x.Source,
			"since": x.DeadAt, "until": x.DeadAt})
		if !a.ok() {
			c.refused(w, r, s, "dlq", a)
			return
		}
		created++
	}
	http.Redirect(w, r, "/console/replays?created="+strconv.Itoa(created), http.StatusSeeOther)
}

func (c *Console) quarantine(w http.ResponseWriter, r *http.Request, s *session) {
	in := r.URL.Query()
	q := url.Values{"limit": {strconv.Itoa(pageSize)}}
	filter := map[string]string{}
	for _, k := range []string{"source_id", "tenant_id", "cursor"} {
		if v := in.Get(k); v != "" {
			q.Set(k, v)
			if k != "cursor" {
				filter[k] = v
			}
		}
	}
	a := c.call(r, s, "GET", "/v1/quarantine", q, nil)
	if !a.ok() {
		c.refused(w, r, s, "quarantine", a)
		return
	}
	d := map[string]any{"Filter": filter, "Entries": a.body["entries"],
		"CanWrite": s.caller.AllTenants() && s.caller.Has(admin.ScopeQuarantineWrite), "Message": in.Get("done")}
	if next, _ := a.body["next_cursor"].(string); next != "" {
		d["Next"] = "/console/quarantine?" + withFilter(url.Values{"cursor": {next}}, filter).Encode()
	}
	c.render(w, r, http.StatusOK, "quarantine", s, view{Title: "Quarantine", Active: "quarantine", Data: d})
}

func (c *Console) quarantineEntry(w http.ResponseWriter, r *http.Request, s *session) {
	in := r.URL.Query()
	id, err := uuid.Parse(in.Get("id"))
	at, aerr := strconv.ParseInt(in.Get("at"), 10, 64)
	if err != nil || aerr != nil || at < 0 {
		c.render(w, r, http.StatusBadRequest, "error", s, view{Title: "Bad request", Active: "quarantine",
			Message: "A held hook is named by its id and receive time."})
		return
	}
	e, err := c.api.QuarantineEntry(s.caller, at, id)
	if errors.Is(err, store.ErrNotFound) {
		c.render(w, r, http.StatusNotFound, "error", s, view{Title: "Not held", Active: "quarantine",
			Message: "The pen does not hold this hook (released or purged)."})
		return
	}
	if c.readFailed(w, r, s, "quarantine", "entry", "quarantine:read", err) {
		return
	}
	hs := make([]headerView, 0, len(e.Hook.Headers))
	for _, x := range e.Hook.Headers {
		hs = append(hs, headerView{x.Name, x.Value})
	}
	body, pretty, truncated, binary := bodyView(e.Hook.Body, e.Hook.ContentType)
	c.render(w, r, http.StatusOK, "entry", s, view{Title: "Held hook", Active: "quarantine", Data: map[string]any{
		"ID": id.String(), "At": at, "Source": e.Hook.Source, "Tenant": e.Hook.Tenant, "Reason": e.Reason,
		"Method": e.Method, "Path": e.Path, "Headers": hs, "Body": body, "Pretty": pretty, "Truncated": truncated,
		"Binary": binary, "Size": len(e.Hook.Body),
		"CanWrite": s.caller.AllTenants() && s.caller.Has(admin.ScopeQuarantineWrite)}})
}

// readFailed renders the refusal or failure of one of admin's in-process reads (what names the object, scope
// the scope it needs beside its tenant) and reports whether there was one.
func (c *Console) readFailed(w http.ResponseWriter, r *http.Request, s *session, active, what, scope string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, admin.ErrForbidden):
		c.render(w, r, http.StatusForbidden, "error", s, view{Title: "Refused", Active: active,
			Message: "The admin API refuses this " + what + " to " + s.caller.Name() + ": forbidden (it needs " + scope +
				" and the " + what + "'s tenant)."})
	case errors.Is(err, admin.ErrUnavailable):
		c.render(w, r, http.StatusServiceUnavailable, "error", s, view{Title: "Unavailable", Active: active,
			Message: "The store is closed or kept by no WAL on this node."})
	default:
		c.log.Error().Err(err).Str("read", what).Msg("console: store read failed")
		c.render(w, r, http.StatusServiceUnavailable, "error", s, view{Title: "Unavailable", Active: active,
			Message: "The store could not be read."})
	}
	return true
}

func (c *Console) quarantineRelease(w http.ResponseWriter, r *http.Request, s *session) {
	body := map[string]any{"source_id": r.PostFormValue("source_id")}
	if l := r.PostFormValue("limit"); l != "" {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			c.render(w, r, http.StatusBadRequest, "error", s, view{Title: "Bad request", Active: "quarantine",
				Message: "The limit is not a number."})
			return
		}
		body["limit"] = n
	}
	a := c.call(r, s, "POST", "/v1/quarantine/release", nil, body)
	if !a.ok() {
		c.refused(w, r, s, "quarantine", a)
		return
	}
	done := fmt.Sprintf("Released %v, %v already stored (duplicates), %v still failing verification.",
		a.body["released"], a.body["duplicates"], a.body["held"])
	http.Redirect(w, r, "/console/quarantine?done="+url.QueryEscape(done), http.StatusSeeOther)
}

func (c *Console) quarantinePurge(w http.ResponseWriter, r *http.Request, s *session) {
	q := url.Values{}
	for _, k := range []string{"source_id", "id"} {
		if v := r.PostFormValue(k); v != "" {
			q.Set(k, v)
		}
	}
	if at := r.PostFormValue("at"); at != "" {
		q.Set("since", at)
		q.Set("until", at)
	}
	a := c.call(r, s, "DELETE", "/v1/quarantine", q, nil)
	if !a.ok() {
		c.refused(w, r, s, "quarantine", a)
		return
	}
	done := fmt.Sprintf("Purged %v held hooks (%v bytes).", a.body["deleted"], a.body["bytes"])
	http.Redirect(w, r, "/console/quarantine?done="+url.QueryEscape(done), http.StatusSeeOther)
}

func (c *Console) replays(w http.ResponseWriter, r *http.Request, s *session) {
	a := c.call(r, s, "GET", "/v1/replays", nil, nil)
	if !a.ok() {
		c.refused(w, r, s, "replays", a)
		return
	}
	v := view{Title: "Replay jobs", Active: "replays", Data: map[string]any{"Jobs": a.body["jobs"],
		"CanWrite": s.caller.Has(admin.ScopeReplaysWrite)}}
	if n := r.URL.Query().Get("created"); n != "" {
		v.Message = "Created " + n + " replay job(s)."
	}
	if st := r.URL.Query().Get("steered"); st != "" {
		v.Message = "The job is now " + st + "."
	}
	c.render(w, r, http.StatusOK, "replays", s, v)
}

func (c *Console) steerReplay(w http.ResponseWriter, r *http.Request, s *session) {
	action := r.PathValue("action")
	if action != "pause" && action != "resume" && action != "cancel" {
		c.render(w, r, http.StatusNotFound, "error", s, view{Title: "Not found", Message: "No such action."})
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.render(w, r, http.StatusBadRequest, "error", s, view{Title: "Bad request", Message: "Not a job id."})
		return
	}
	a := c.call(r, s, "POST", "/v1/replays/"+id.String()+"/"+action, nil, nil)
	if !a.ok() {
		c.refused(w, r, s, "replays", a)
		return
	}
	st, _ := a.body["state"].(string)
	http.Redirect(w, r, "/console/replays?steered="+url.QueryEscape(st), http.StatusSeeOther)
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request, s *session) {
	in := r.URL.Query()
	q := url.Values{"limit": {strconv.Itoa(pageSize)}}
	filter := map[string]string{}
	for _, k := range []string{"tenant_id", "subject", "cursor"} {
		if v := in.Get(k); v != "" {
			q.Set(k, v)
			if k != "cursor" {
				filter[k] = v
			}
		}
	}
	a := c.call(r, s, "GET", "/v1/audit", q, nil)
	if !a.ok() {
		c.refused(w, r, s, "audit", a)
		return
	}
	d := map[string]any{"Filter": filter, "Entries": a.body["entries"]}
	if next, _ := a.body["next_cursor"].(string); next != "" {
		d["Next"] = "/console/audit?" + withFilter(url.Values{"cursor": {next}}, filter).Encode()
	}
	c.render(w, r, http.StatusOK, "audit", s, view{Title: "Audit log", Active: "audit", Data: d})
}

// withFilter adds the non-empty filters to q (a next page's link keeps them).
func withFilter(q url.Values, filter map[string]string) url.Values {
	for k, v := range filter {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}
