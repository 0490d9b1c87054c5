package edge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/verify"
)

// Handle is the fasthttp handler of the ingest listener: a catch-all POST, plus
// GET /health and GET /ready.
func (e *Edge) Handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		if ctx.IsGet() {
			switch string(ctx.Path()) {
			case "/health":
				e.writeHealth(ctx)
				return
			case "/ready":
				e.writeReady(ctx)
				return
			}
		}
		writeRefusal(ctx, refuseNotFound)
		return
	}
	e.ingest(ctx)
}

// ingest runs the steps of one POST in the order the design fixes: everything that can
// refuse before the body is read first, then the bounded read, then admission, then the
// commit. Only a committed record is answered 201.
func (e *Edge) ingest(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	route, ok := e.resolver.Resolve(ctx.Path())
	if !ok {
		e.refuseEarly(ctx, refuseUnknownSource)
		return
	}
	if cl := ctx.Request.Header.ContentLength(); cl > 0 && int64(cl) > e.set.MaxBodyBytes {
		e.refuseEarly(ctx, refuseTooLarge(e.set.MaxBodyBytes))
		return
	}
	src, err := e.sources.Lookup(route.Source)
	if err != nil {
		if errors.Is(err, ErrUnknownSource) {
			e.refuseEarly(ctx, refuseUnknownSource)
		} else {
			e.log.Warn().Err(err).Msg("source store cannot answer")
			e.refuseEarly(ctx, refuseSourceStore)
		}
		return
	}
	tenant := src.Tenant
	if route.Tenant != nil {
		// The URL's tenant is authoritative; a source owned by another tenant does not
		// exist for it, and a shared source takes the URL's tenant.
		switch {
		case src.Tenant == string(route.Tenant):
		case src.Tenant == DefaultTenant:
			tenant = string(route.Tenant)
		default:
			e.refuseEarly(ctx, refuseUnknownSource)
			return
		}
	}
	trust := src.Trust
	if r := e.preRead(ctx, src, tenant, start); r != nil {
		e.refuseEarly(ctx, r)
		return
	}
	if r := checkHeaders(&ctx.Request.Header); r != nil {
		e.refuseEarly(ctx, r)
		return
	}

	sc := e.scratch.Get().(*scratch)
	sc.ctx = ctx
	defer func() { sc.ctx = nil; e.scratch.Put(sc) }()
	maxBody := e.tenantMaxBody(tenant)
	body, err := readBody(ctx, maxBody, sc.body[:0])
	sc.body = body[:0]
	if err != nil {
		if errors.Is(err, errTooLarge) {
			e.refuseEarly(ctx, refuseTooLarge(maxBody))
		} else {
			e.refuseEarly(ctx, refuseBodyRead(err))
		}
		return
	}

	// Verification reads the exact bytes and every header, before store_headers drops any.
	vreq := verify.Request{Body: body, Header: sc.header, Query: sc.query, Now: start}
	if trust.PeerCert {
		if st := ctx.TLSConnectionState(); st != nil && len(st.PeerCertificates) > 0 {
			vreq.PeerCert = st.PeerCertificates[0]
		}
	}
	vres := trust.Verifier.Verify(&vreq)
	if vres.WeakHash {
		e.tel.WeakHash(src.ID, vres.Scheme)
	}
	flagged := false
	if vres.Status == verify.StatusFailed {
		e.tel.VerifyFailed(src.ID, vres.Provider, vres.Scheme)
		switch trust.OnFailure {
		case config.OnVerifyAcceptFlag:
			// Stored anyway, flagged; it spends the source's quarantine bucket, so a forged
			// flood is bounded, and it gets no dedupe key, so it cannot suppress the real event.
			if ok, wait := e.limits.penBuckets.Take(src.ID, start, e.limits.quarantine, 1); !ok {
				e.answer(ctx, src.ID, start, refuse429("quarantine_rate_limited", wait), "quarantine_rate_limited")
				return
			}
			flagged = true
		case config.OnVerifyQuarantine:
			if ok, wait := e.limits.penBuckets.Take(src.ID, start, e.limits.quarantine, 1); !ok {
				e.answer(ctx, src.ID, start, refuse429("quarantine_rate_limited", wait), "quarantine_rate_limited")
				return
			}
			reason := verifyReason(vres.Reason)
			hdrs := collectHeaders(&ctx.Request.Header, sc)
			hdrs, sc.hashed = trust.Headers.Apply(hdrs, sc.hashed[:0])
			entry := store.QuarantineEntry{
				Hook: store.Hook{ID: newID(start), ReceivedAt: start.UnixMilli(), Tenant: tenant, Source: src.ID,
					ContentType: string(ctx.Request.Header.ContentType()), Headers: cloneHeaders(hdrs), Body: bytes.Clone(body)},
				Method: string(ctx.Method()), Path: string(ctx.Path()), Reason: reason,
			}
			if r := e.quarantine(entry); r != nil {
				e.answer(ctx, src.ID, start, r, r.Reason)
				return
			}
			ctx.SetStatusCode(fasthttp.StatusAccepted)
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"status":"quarantined","reason":"` + reason + `"}`)
			e.tel.Ingest(src.ID, "quarantined", time.Since(start))
			return
		default:
			e.answer(ctx, src.ID, start, refuseVerification(vres.Reason), "rejected")
			return
		}
	}
	dedupeKey := ""
	var dedupeTTL time.Duration
	if trust.Dedupe != nil && !flagged {
		dedupeKey, dedupeTTL = trust.Dedupe.Key(sc.header, body), trust.Dedupe.TTL()
	}

	hdrs := collectHeaders(&ctx.Request.Header, sc)
	hdrs, sc.hashed = trust.Headers.Apply(hdrs, sc.hashed[:0])
	size := int64(len(body))
	if r := e.chargeTenant(tenant, size, start); r != nil {
		label := "other"
		if _, ok := e.limits.cfg.Tenants[tenant]; ok || tenant == src.Tenant {
			label = tenant
		}
		e.tel.RateLimited(label)
		e.answer(ctx, src.ID, start, r, "rate_limited")
		return
	}

	id := newID(start)
	hook := store.Hook{
		ID: id, ReceivedAt: start.UnixMilli(), Tenant: tenant, Source: src.ID,
		ContentType: view(ctx.Request.Header.ContentType()),
		Headers:     hdrs, Body: body, Flagged: flagged, DedupeKey: dedupeKey,
	}
	if dedupeKey != "" {
		// Fast path: a provider retry of a committed event is answered without queueing.
		// The writer re-checks every key anyway, so a read that predates another
		// partition's commit still ends as a duplicate.
		if db := e.db(); db != nil {
			orig, dup, err := db.LookupDedupe(tenant, src.ID, dedupeKey, start)
			switch {
			case err != nil:
				e.answer(ctx, src.ID, start, refuseStore, telemetry.OutcomeStoreUnavailable)
				return
			case dup:
				e.duplicate(ctx, sc, orig)
				e.tel.Ingest(src.ID, telemetry.OutcomeDuplicate, time.Since(start))
				return
			}
		}
	}
	share, ok := e.admitTenant(tenant, size)
	if !ok {
		e.answer(ctx, src.ID, start, refuse429("tenant_overload", time.Second), "tenant_overload")
		return
	}
	defer share.release(size)
	p := e.partitionOf(src.ID, id)
	part := &e.parts[p]
	if !part.admit(size, e.set.MaxQueue, e.set.MaxQueueBytes) {
		e.tel.LoadShed()
		e.answer(ctx, src.ID, start, refuseOverload, telemetry.OutcomeOverload)
		return
	}
	defer part.release(size)

	rec := &store.Pending{
		Record: store.Record{
			ID: id, Tenant: tenant, Source: src.ID, ReceivedAt: hook.ReceivedAt, Size: uint32(size),
			Value: store.AppendHook(make([]byte, 0, store.HookSize(&hook)), &hook),
			Sinks: src.Sinks, Archive: e.set.Archive, DedupeKey: dedupeKey, DedupeTTL: dedupeTTL,
		},
		Done: make(chan store.Result, 1),
	}
	e.system.Root.Send(e.batchers[p], rec)

	res, ok := e.wait(rec, sc, e.set.RecordDeadline-time.Since(start))
	switch {
	case !ok:
		e.answer(ctx, src.ID, start, refuseDeadline, telemetry.OutcomeDeadline)
	case errors.Is(res.Err, store.ErrDedupeQuota):
		e.answer(ctx, src.ID, start, refuseDedupeQuota, "dedupe_quota")
	case res.Err != nil:
		e.answer(ctx, src.ID, start, refuseStore, telemetry.OutcomeStoreUnavailable)
	case res.Duplicate:
		e.duplicate(ctx, sc, res.OriginalID)
		e.tel.Ingest(src.ID, telemetry.OutcomeDuplicate, time.Since(start))
	default:
		e.accepted(ctx, sc, id)
		e.tel.Ingest(src.ID, telemetry.OutcomeCommitted, time.Since(start))
	}
}

// wait blocks until the record's group returns or its deadline passes. At the deadline
// a record whose group has not started is expired (never committed) and false is
// returned; a record whose group started is waited out, because a started group is
// never abandoned and may commit.
func (e *Edge) wait(rec *store.Pending, sc *scratch, d time.Duration) (store.Result, bool) {
	if d <= 0 {
		d = time.Nanosecond
	}
	sc.timer.Reset(d)
	defer sc.timer.Stop()
	select {
	case res := <-rec.Done:
		return res, true
	case <-sc.timer.C:
		if rec.Expire() {
			return store.Result{}, false
		}
		return <-rec.Done, true
	}
}

// partitionOf spreads records over the partitions by source and id.
func (e *Edge) partitionOf(source string, id [16]byte) int {
	if len(e.parts) == 1 {
		return 0
	}
	h := maphash.String(e.seed, source) ^ binary.LittleEndian.Uint64(id[8:])
	return int(h % uint64(len(e.parts)))
}

// refuseEarly answers a request refused before it was admitted; only the reason is
// counted, never the (unauthenticated) source.
func (e *Edge) refuseEarly(ctx *fasthttp.RequestCtx, r *RefusedError) {
	e.tel.Refused(r.Reason)
	writeRefusal(ctx, r)
}

func (e *Edge) answer(ctx *fasthttp.RequestCtx, source string, start time.Time, r *RefusedError, outcome string) {
	writeRefusal(ctx, r)
	e.tel.Ingest(source, outcome, time.Since(start))
}

// accepted writes 201 {"status":"accepted","id":"…"}, the only committed answer.
func (e *Edge) accepted(ctx *fasthttp.RequestCtx, sc *scratch, id [16]byte) {
	b := append(sc.resp[:0], `{"status":"accepted","id":"`...)
	b = appendID(b, id)
	b = append(b, `"}`...)
	sc.resp = b
	ctx.SetStatusCode(fasthttp.StatusCreated)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// duplicate writes 201 with the original hook's id and "duplicate": true; nothing new was stored.
func (e *Edge) duplicate(ctx *fasthttp.RequestCtx, sc *scratch, orig [16]byte) {
	b := append(sc.resp[:0], `{"status":"accepted","id":"`...)
	b = appendID(b, orig)
	b = append(b, `","duplicate":true}`...)
	sc.resp = b
	ctx.SetStatusCode(fasthttp.StatusCreated)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func writeRefusal(ctx *fasthttp.RequestCtx, r *RefusedError) {
	ctx.SetStatusCode(r.Status)
	ctx.SetContentType("application/json")
	if r.RetryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(r.RetryAfter))
	}
	b := append(make([]byte, 0, 64), `{"error":"`...)
	b = append(b, r.Reason...)
	b = append(b, '"')
	if r.Detail.key != "" {
		b = append(b, `,"`...)
		b = append(b, r.Detail.key...)
		b = append(b, `":`...)
		b = append(b, r.Detail.value...)
	}
	b = append(b, '}')
	ctx.SetBody(b)
}

func (e *Edge) writeHealth(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"status":"ok","instance":` + jsonString(e.set.Instance) + `}`)
}

func (e *Edge) writeReady(ctx *fasthttp.RequestCtx) {
	ok, status, st := e.health.Ready(time.Now())
	ctx.SetContentType("application/json")
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.Response.Header.Set("Retry-After", "1")
		if status == "draining" {
			ctx.SetBodyString(`{"status":"draining"}`)
			return
		}
	}
	ctx.SetBodyString(`{"status":"` + status + `","instance":` + jsonString(e.set.Instance) + `,"store":"` + st + `"}`)
}

var errTooLarge = errors.New("edge: body over max_body_bytes")

// readBody reads the request body into dst, never more than max bytes: a chunked body
// has no length to check up front, so the cap is enforced as it streams.
func readBody(ctx *fasthttp.RequestCtx, max int64, dst []byte) ([]byte, error) {
	r := ctx.RequestBodyStream()
	if r == nil {
		b := ctx.Request.Body()
		if int64(len(b)) > max {
			return dst, errTooLarge
		}
		return append(dst, b...), nil
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if int64(len(dst)) > max {
			return dst, errTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// cloneHeaders copies headers out of the request's reusable memory.
func cloneHeaders(h []store.Header) []store.Header {
	out := make([]store.Header, len(h))
	for i, x := range h {
		out[i] = store.Header{Name: strings.Clone(x.Name), Value: strings.Clone(x.Value)}
	}
	return out
}
