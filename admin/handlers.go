package admin

import (
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/dispatch"
	"github.com/ankusa-go/ankusa/store"
)

//go:embed openapi.yaml
var openAPIDoc []byte

func (a *api) openAPI(w http.ResponseWriter, _ *http.Request, _ *principal) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(openAPIDoc)
}

// badParam answers 400 invalid_filter naming the field (never its value).
func badParam(w http.ResponseWriter, field string) {
	writeError(w, http.StatusBadRequest, codeInvalidFilter, map[string]any{"field": field})
}

// allTenants refuses (403) a principal scoped to some tenants on a route that acts on every tenant's objects.
func allTenants(w http.ResponseWriter, p *principal) bool {
	if !p.allTenants {
		writeError(w, http.StatusForbidden, codeForbidden, map[string]any{"tenant": "*"})
		return false
	}
	return true
}

// tenantParam reads tenant_id: 400 invalid_tenant when malformed, 403 when p may not see it.
func tenantParam(w http.ResponseWriter, q *query, p *principal) (tenant string, ok bool) {
	tenant = q.v.Get("tenant_id")
	if tenant == "" {
		return "", true
	}
	if !validID(tenant) {
		writeError(w, http.StatusBadRequest, codeInvalidTenant, nil)
		return "", false
	}
	if !p.sees(tenant) {
		writeError(w, http.StatusForbidden, codeForbidden, map[string]any{"tenant": tenant})
		return "", false
	}
	return tenant, true
}

// db returns the open store, or answers 409 wal_disabled (wal.type none keeps no rows) / 503.
func (a *api) db(w http.ResponseWriter) *store.DB {
	if a.d.Config.WAL.Type == config.WALNone {
		writeError(w, http.StatusConflict, codeWALDisabled, nil)
		return nil
	}
	var db *store.DB
	if a.d.Store != nil {
		db = a.d.Store()
	}
	if db == nil {
		writeError(w, http.StatusServiceUnavailable, codeStoreUnavailable, nil)
	}
	return db
}

// failed answers an error of the store or dispatch: 503 store_unavailable, logged with the route's name.
func (a *api) failed(w http.ResponseWriter, what string, err error) {
	a.d.Log.Error().Err(err).Str("admin_route", what).Msg("admin request failed")
	writeError(w, http.StatusServiceUnavailable, codeStoreUnavailable, nil)
}

// changed logs who changed what (the audit trail proper is a later addition): never a body or a raw value.
func (a *api) changed(r *http.Request, p *principal, what string) *zerolog.Event {
	return a.d.Log.Info().Str("principal", p.name).Str("client", r.RemoteAddr).Str("admin_change", what)
}

func (a *api) config(w http.ResponseWriter, _ *http.Request, p *principal) {
	c := a.d.Config.Redacted()
	if !p.allTenants {
		// A tenant-scoped principal sees its tenants' sources only.
		if srcs, ok := c["sources"].(map[string]any); ok {
			for id, s := range srcs {
				m, _ := s.(map[string]any)
				tenant, _ := m["tenant"].(string)
				if !p.sees(tenant) {
					delete(srcs, id)
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, c)
}

func (a *api) wal(w http.ResponseWriter, _ *http.Request, p *principal) {
	if !allTenants(w, p) {
		return
	}
	db := a.db(w)
	if db == nil {
		return
	}
	c := db.Counts()
	qb, qn := db.QuarantineStats()
	est := db.Estimate()
	body := map[string]any{
		"next_seq": db.NextSeq(), "pending": c.Pending, "scheduled": c.Scheduled, "inflight": c.Inflight,
		"dead": c.Dead, "pending_bytes": c.PendingBytes, "archive_pending": c.ArchivePending,
		"quarantine": map[string]any{"entries": qn, "bytes": qb},
	}
	body["hooks"], body["deliveries"], body["disk_bytes"] = est.Hooks, est.Deliveries, est.DiskBytes
	if a.d.Intake != nil {
		in := a.d.Intake()
		if in.Partitions == nil {
			in.Partitions = []IntakePartition{}
		}
		body["intake"] = in
	}
	writeJSON(w, http.StatusOK, body)
}

// DLQ limits (inventory A.5: default 100, clamped to 1000). A page visits at most dlqVisitsPerPage dead rows
// (or limit, when larger), so a source or reason filter that matches few rows answers in bounded time, with a
// cursor to go on.
const (
	dlqVisitsPerPage = 2000
	defaultListLimit = 100
	maxListLimit     = 1000
)

func (a *api) dlq(w http.ResponseWriter, r *http.Request, p *principal) {
	q := newQuery(r)
	f := store.DeadFilter{Source: q.id("source_id"), Since: q.int("since", 0), Before: q.deadCursor(),
		Reason: q.text("reason", 256)}
	limit := q.limit(defaultListLimit, maxListLimit)
	if q.bad != "" {
		badParam(w, q.bad)
		return
	}
	tenant, ok := tenantParam(w, q, p)
	if !ok {
		return
	}
	switch {
	case tenant != "":
		f.Tenants = []string{tenant}
	case !p.allTenants:
		f.Tenants = p.visible()
	}
	db := a.db(w)
	if db == nil {
		return
	}
	f.MaxVisits = max(dlqVisitsPerPage, limit)
	page, err := db.ScanDeadPage(f, limit)
	dead := page.Entries
	if err != nil {
		a.failed(w, "dlq", err)
		return
	}
	total := db.Counts().Dead
	if f.Tenants != nil {
		total = 0
		for _, t := range f.Tenants {
			if ord, ok := db.TenantOrdinal(t); ok {
				total += db.TenantCounts(ord).Dead
			}
		}
	}
	entries := make([]map[string]any, 0, len(dead))
	for _, e := range dead {
		entries = append(entries, map[string]any{
			"id": uuid.UUID(e.ID).String(), "source_id": e.Source, "tenant_id": e.Tenant, "seq": e.Seq,
			"sink": e.Sink, "sink_type": e.SinkType, "received_at": e.ReceivedAt, "dead_lettered_at": e.DeadAt,
			"size": e.Size, "reason": e.Reason,
		})
	}
	body := map[string]any{"total": total, "entries": entries}
	switch {
	case page.Resume != nil:
		// The scan stopped at its budget (a filter matching few rows): the page may hold fewer than limit.
		body["next_cursor"] = encodeDeadCursor(*page.Resume)
	case len(dead) == limit && limit > 0:
		body["next_cursor"] = encodeDeadCursor(dead[len(dead)-1].Cursor())
	}
	writeJSON(w, http.StatusOK, body)
}

func jobJSON(j store.ReplayJob) map[string]any {
	out := map[string]any{
		"id": uuid.UUID(j.ID).String(), "kind": j.Kind, "source_id": j.Source, "since": j.Since, "until": j.Until,
		"rate": j.Rate, "max_lag_ms": j.MaxLagMS, "created_at": j.CreatedAt, "state": j.State, "moved": j.Moved,
	}
	switch j.Kind {
	case dispatch.ReplayArchive:
		out["tenant_id"], out["skipped"] = j.Tenant, j.Skipped
	case store.ReplayKindLifecycle:
		out["tenant_id"] = j.Tenant
	}
	return out
}

// dispatcher returns the dispatcher, or answers 409 role_not_enabled.
func (a *api) dispatcher(w http.ResponseWriter) *dispatch.Dispatcher {
	if a.d.Dispatcher == nil {
		writeError(w, http.StatusConflict, codeRoleNotEnabled, map[string]any{"role": config.RoleDispatch})
	}
	return a.d.Dispatcher
}

// replayJobs lists and steers the recorded replay jobs: the dispatcher, or the store itself on a node whose
// only replay runner is the lifecycle publisher.
type replayJobs interface {
	Replays() ([]store.ReplayJob, error)
	SteerReplay(id [16]byte, state string) (store.ReplayJob, error)
}

// storeReplays is replayJobs over the store (a node without dispatch, with lifecycle.sinks).
type storeReplays struct{ db *store.DB }

func (s storeReplays) Replays() ([]store.ReplayJob, error) { return s.db.ReplayJobs() }

func (s storeReplays) SteerReplay(id [16]byte, state string) (store.ReplayJob, error) {
	j, err := s.db.SteerReplayJob(id, state)
	if errors.Is(err, store.ErrNotFound) {
		return j, dispatch.ErrNoSuchJob
	}
	return j, err
}

// replayDispatcher is what a replay route lists and steers, or nil once the refusal is written: the principal
// must hold every tenant (403) and the node must run dispatch or publish lifecycle events (409), in that order.
func (a *api) replayDispatcher(w http.ResponseWriter, p *principal) replayJobs {
	if !allTenants(w, p) {
		return nil
	}
	if a.d.Dispatcher == nil && a.d.Lifecycle {
		if db := a.db(w); db != nil {
			return storeReplays{db}
		}
		return nil
	}
	if d := a.dispatcher(w); d != nil {
		return d
	}
	return nil
}

// Replay jobs act on every tenant's dead rows of a source (a shared source's rows belong to many tenants), so
// they need a principal of every tenant.
func (a *api) createReplay(w http.ResponseWriter, r *http.Request, p *principal) {
	if !allTenants(w, p) {
		return
	}
	var req struct {
		Kind     string  `json:"kind"`
		SourceID string  `json:"source_id"`
		TenantID string  `json:"tenant_id"`
		Since    int64   `json:"since"`
		Until    int64   `json:"until"`
		Rate     float64 `json:"rate"`
		MaxLagMS int64   `json:"max_lag_ms"`
	}
	if err := decodeBody(w, r, &req); err != nil {
		badParam(w, "body")
		return
	}
	lifecycleJob := req.Kind == store.ReplayKindLifecycle
	switch {
	case req.Kind != dispatch.ReplayDLQ && req.Kind != dispatch.ReplayArchive && !lifecycleJob:
		badParam(w, "kind") // quarantine jobs are not run by this node yet (POST /v1/quarantine/release is)
		return
	case req.SourceID != "" && (!validID(req.SourceID) || lifecycleJob):
		badParam(w, "source_id") // a lifecycle job filters on the tenant only
		return
	case req.TenantID != "" && (req.Kind == dispatch.ReplayDLQ || !validID(req.TenantID)):
		badParam(w, "tenant_id") // a dlq job moves every tenant's dead rows of its source
		return
	case req.Kind == dispatch.ReplayArchive && (req.Since <= 0 || req.Until <= req.Since || req.Until > time.Now().UnixMilli()):
		badParam(w, "until") // an archive window is [since, until), both set, ending by now
		return
	case req.Since < 0:
		badParam(w, "since")
		return
	case req.Until < 0 || req.Until > 0 && req.Until < req.Since:
		badParam(w, "until")
		return
	case lifecycleJob && (req.Until > 0 && req.Until <= req.Since || req.Until > time.Now().UnixMilli()):
		badParam(w, "until") // a lifecycle window is [since, until), until by now (0: now)
		return
	case req.Rate < 0 || req.Rate > dispatch.MaxReplayRate:
		badParam(w, "rate")
		return
	case req.MaxLagMS < 0:
		badParam(w, "max_lag_ms")
		return
	}
	if lifecycleJob {
		a.createLifecycleReplay(w, r, p, store.ReplayJob{Kind: req.Kind, Tenant: req.TenantID, Since: req.Since,
			Until: req.Until, Rate: req.Rate, MaxLagMS: req.MaxLagMS})
		return
	}
	d := a.dispatcher(w)
	if d == nil {
		return
	}
	var j store.ReplayJob
	e := entry(w, r, p, "replay.create", "replay", "")
	e.After = []byte(fmt.Sprintf("%s %s %s %d %d %g %d", req.Kind, req.SourceID, req.TenantID, req.Since, req.Until, req.Rate, req.MaxLagMS))
	ok, err := a.external(w, "create replay", e, func() (err error) {
		j, err = d.CreateReplay(dispatch.ReplayRequest{Kind: req.Kind, Source: req.SourceID, Tenant: req.TenantID, Since: req.Since,
			Until: req.Until, Rate: req.Rate, MaxLagMS: req.MaxLagMS})
		return err
	})
	if !ok {
		return
	}
	if errors.Is(err, dispatch.ErrReplayKind) {
		// An archive job on a node without the storage role's archive.
		writeError(w, http.StatusConflict, codeRoleNotEnabled, map[string]any{"role": config.RoleStorage})
		return
	}
	if err != nil {
		a.failed(w, "create replay", err)
		return
	}
	a.changed(r, p, "replay created").Str("replay_id", uuid.UUID(j.ID).String()).Msg("admin change")
	writeJSON(w, http.StatusCreated, jobJSON(j))
}

// createLifecycleReplay records a lifecycle replay job, which the node's lifecycle publisher runs: 409
// lifecycle_disabled without lifecycle.sinks (there is nowhere to publish to).
func (a *api) createLifecycleReplay(w http.ResponseWriter, r *http.Request, p *principal, spec store.ReplayJob) {
	if !a.d.Lifecycle {
		writeError(w, http.StatusConflict, codeLifecycleOff, map[string]any{"setting": "lifecycle.sinks"})
		return
	}
	db := a.db(w)
	if db == nil {
		return
	}
	j, err := store.NewReplayJob(spec, time.Now())
	if err != nil {
		badParam(w, "until")
		return
	}
	e := entry(w, r, p, "replay.create", "replay", "")
	e.After = []byte(fmt.Sprintf("%s %s %d %d %g", j.Kind, j.Tenant, j.Since, j.Until, j.Rate))
	ok, err := a.external(w, "create replay", e, func() error { return db.PutReplayJob(&j) })
	if !ok {
		return
	}
	if err != nil {
		a.failed(w, "create replay", err)
		return
	}
	a.changed(r, p, "replay created").Str("replay_id", uuid.UUID(j.ID).String()).Msg("admin change")
	writeJSON(w, http.StatusCreated, jobJSON(j))
}

func (a *api) listReplays(w http.ResponseWriter, _ *http.Request, p *principal) {
	d := a.replayDispatcher(w, p)
	if d == nil {
		return
	}
	jobs, err := d.Replays()
	if err != nil {
		a.failed(w, "list replays", err)
		return
	}
	out := make([]map[string]any, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, jobJSON(j))
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out})
}

func (a *api) getReplay(w http.ResponseWriter, r *http.Request, p *principal) {
	id, ok := parseID(r.PathValue("id"))
	if !ok {
		badParam(w, "id")
		return
	}
	d := a.replayDispatcher(w, p)
	if d == nil {
		return
	}
	jobs, err := d.Replays()
	if err != nil {
		a.failed(w, "get replay", err)
		return
	}
	i := slices.IndexFunc(jobs, func(j store.ReplayJob) bool { return j.ID == id })
	if i < 0 {
		writeError(w, http.StatusNotFound, codeNotFound, nil)
		return
	}
	writeJSON(w, http.StatusOK, jobJSON(jobs[i]))
}

// steerReplay sets a job's state: to, or (PATCH) the body's {"state"}. A finished or cancelled job cannot
// change any more: 409 conflict with its state.
func (a *api) steerReplay(to string) func(http.ResponseWriter, *http.Request, *principal) {
	return func(w http.ResponseWriter, r *http.Request, p *principal) {
		id, ok := parseID(r.PathValue("id"))
		if !ok {
			badParam(w, "id")
			return
		}
		state := to
		if state == "" {
			var req struct {
				State string `json:"state"`
			}
			if err := decodeBody(w, r, &req); err != nil {
				badParam(w, "body")
				return
			}
			state = req.State
		}
		if state != dispatch.JobRunning && state != dispatch.JobPaused && state != dispatch.JobCancelled {
			badParam(w, "state")
			return
		}
		d := a.replayDispatcher(w, p)
		if d == nil {
			return
		}
		var j store.ReplayJob
		e := entry(w, r, p, "replay."+state, "replay:"+uuid.UUID(id).String(), "")
		e.After = []byte(state)
		ok, err := a.external(w, "steer replay", e, func() (err error) {
			j, err = d.SteerReplay(id, state)
			return err
		})
		if !ok {
			return
		}
		switch {
		case errors.Is(err, dispatch.ErrNoSuchJob):
			writeError(w, http.StatusNotFound, codeNotFound, nil)
			return
		case err != nil:
			a.failed(w, "steer replay", err)
			return
		case j.State != state:
			writeError(w, http.StatusConflict, codeConflict, map[string]any{"state": j.State})
			return
		}
		a.changed(r, p, "replay "+state).Str("replay_id", uuid.UUID(j.ID).String()).Msg("admin change")
		writeJSON(w, http.StatusOK, jobJSON(j))
	}
}

func (a *api) listQuarantine(w http.ResponseWriter, r *http.Request, p *principal) {
	q := newQuery(r)
	source := q.id("source_id")
	limit := q.limit(defaultListLimit, maxListLimit)
	before := q.penCursor()
	if q.bad != "" {
		badParam(w, q.bad)
		return
	}
	tenant, ok := tenantParam(w, q, p)
	if !ok {
		return
	}
	db := a.db(w)
	if db == nil {
		return
	}
	held, err := db.ListQuarantinePage(source, before, limit)
	if err != nil {
		a.failed(w, "list quarantine", err)
		return
	}
	entries := make([]map[string]any, 0, len(held))
	for _, s := range held {
		if tenant != "" && s.Tenant != tenant || !p.sees(s.Tenant) {
			continue
		}
		entries = append(entries, map[string]any{
			"id": uuid.UUID(s.ID).String(), "source_id": s.Source, "tenant_id": s.Tenant,
			"received_at": s.ReceivedAt, "reason": s.Reason, "size": s.Size,
		})
	}
	body := map[string]any{"entries": entries}
	if len(held) == limit && limit > 0 {
		// The cursor is the last entry read, shown or not, so a page of another tenant's entries still advances.
		last := held[len(held)-1]
		body["next_cursor"] = encodePenCursor(store.PenCursor{ReceivedAt: last.ReceivedAt, ID: last.ID})
	}
	writeJSON(w, http.StatusOK, body)
}

// Purge limits (inventory A.5: default 1,000, at most 10,000).
const (
	defaultPurgeLimit = 1000
	maxPurgeLimit     = 10_000
)

func (a *api) purgeQuarantine(w http.ResponseWriter, r *http.Request, p *principal) {
	q := newQuery(r)
	source, id := q.id("source_id"), q.hookID("id")
	since, until := q.int("since", 0), q.int("until", 0)
	limit := q.limit(defaultPurgeLimit, maxPurgeLimit)
	if until > 0 && since > until {
		q.fail("until")
	}
	if q.bad != "" {
		badParam(w, q.bad)
		return
	}
	if !allTenants(w, p) {
		return
	}
	db := a.db(w)
	if db == nil {
		return
	}
	var n int
	var bytes int64
	e := entry(w, r, p, "quarantine.purge", "quarantine", "")
	e.After = []byte(r.URL.RawQuery)
	ok, err := a.external(w, "purge quarantine", e, func() (err error) {
		n, bytes, err = db.PurgeQuarantine(source, id, since, until, limit)
		return err
	})
	if !ok {
		return
	}
	if err != nil {
		a.failed(w, "purge quarantine", err)
		return
	}
	a.changed(r, p, "quarantine purged").Int("deleted", n).Msg("admin change")
	writeJSON(w, http.StatusOK, map[string]any{"deleted": n, "bytes": bytes})
}

// Release limits: a release verifies and commits each hook while the caller waits.
const (
	defaultReleaseLimit = 100
	maxReleaseLimit     = 1000
)

func (a *api) releaseQuarantine(w http.ResponseWriter, r *http.Request, p *principal) {
	var req struct {
		SourceID string `json:"source_id"`
		Limit    *int64 `json:"limit"`
	}
	if err := decodeBody(w, r, &req); err != nil {
		badParam(w, "body")
		return
	}
	limit := int64(defaultReleaseLimit)
	switch {
	case req.SourceID != "" && !validID(req.SourceID):
		badParam(w, "source_id")
		return
	case req.Limit != nil && *req.Limit < 0:
		badParam(w, "limit")
		return
	case req.Limit != nil:
		limit = min(*req.Limit, maxReleaseLimit)
	}
	if !allTenants(w, p) {
		return
	}
	if a.d.Release == nil {
		writeError(w, http.StatusConflict, codeRoleNotEnabled, map[string]any{"role": config.RoleEdge})
		return
	}
	var rep ReleaseReport
	e := entry(w, r, p, "quarantine.release", "quarantine", "")
	e.After = []byte(fmt.Sprintf("release %s %d", req.SourceID, limit))
	ok, err := a.external(w, "release quarantine", e, func() (err error) {
		rep, err = a.d.Release(req.SourceID, int(limit))
		return err
	})
	if !ok {
		return
	}
	if err != nil {
		a.failed(w, "release quarantine", err)
		return
	}
	a.changed(r, p, "quarantine released").Int("released", rep.Released).Msg("admin change")
	writeJSON(w, http.StatusOK, map[string]any{"released": rep.Released, "duplicates": rep.Duplicates, "held": rep.Held})
}

// logLevels are the levels log.level accepts, as zerolog levels.
var logLevels = map[string]zerolog.Level{
	"debug": zerolog.DebugLevel, "info": zerolog.InfoLevel, "warning": zerolog.WarnLevel, "error": zerolog.ErrorLevel,
}

// levelName is the log.level name of l.
func levelName(l zerolog.Level) string {
	for n, v := range logLevels {
		if v == l {
			return n
		}
	}
	return l.String()
}

func (a *api) setLogLevel(w http.ResponseWriter, r *http.Request, p *principal) {
	var req struct {
		Level string `json:"level"`
	}
	if err := decodeBody(w, r, &req); err != nil {
		badParam(w, "body")
		return
	}
	lvl, ok := logLevels[req.Level]
	if !ok {
		badParam(w, "level")
		return
	}
	if !allTenants(w, p) {
		return
	}
	e := entry(w, r, p, "log_level.set", "log_level", "")
	e.After = []byte(req.Level)
	if a.d.LogLevel != nil {
		e.Before = []byte(levelName(a.d.LogLevel()))
	}
	if !a.record(w, "log level", e) {
		return
	}
	a.d.SetLogLevel(lvl)
	a.changed(r, p, "log level").Str("level", req.Level).Msg("admin change")
	writeJSON(w, http.StatusOK, map[string]any{"level": req.Level})
}
