package edge

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"runtime/debug"
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
// GET /health and GET /ready. A panic is answered 500 internal, counted and logged;
// the process goes on.
func (e *Edge) Handle(ctx *fasthttp.RequestCtx) {
	defer func() {
		if p := recover(); p != nil {
			e.recovered(ctx, p)
		}
	}()
	if e.health.Draining() {
		// Every answer during the drain closes its connection, so keep-alive clients
		// reconnect (to a node still ready) while this one serves: a connection left idle
		// until the listener closes could take a request as it closes, and that request
		// would see a reset instead of an answer.
		ctx.SetConnectionClose()
	}
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
		if e.guard != nil {
			if r := e.checkRoute(ctx); r != nil {
				e.refuseEarly(ctx, r)
				return
			}
		}
		if ctx.IsGet() && e.handshakeGET(ctx) {
			return
		}
		writeRefusal(ctx, refuseNotFound)
		return
	}
	// The route guard runs first, before anything is read (the Expect handler ran it already when it marked
	// the request).
	if e.guard != nil && ctx.UserValue(preReadChecked{}) == nil {
		if r := e.checkRoute(ctx); r != nil {
			e.refuseEarly(ctx, r)
			return
		}
	}
	e.ingest(ctx)
}

// recovered answers a request whose handler panicked. The log names the panic and its
// stack, never the request's body or headers; a panic value that is not a runtime error
// is named by its type alone, since it may carry request bytes.
func (e *Edge) recovered(ctx *fasthttp.RequestCtx, p any) {
	e.tel.IngestPanic()
	ev := e.log.Error().Bytes("stack", debug.Stack())
	if re, ok := p.(runtime.Error); ok {
		ev = ev.Str("panic", re.Error())
	} else {
		ev = ev.Str("panic_type", fmt.Sprintf("%T", p))
	}
	ev.Msg("ingest handler panicked")
	// Not Response.Reset: it would drop the server's per-connection header settings.
	ctx.Response.ResetBody()
	ctx.Response.Header.Del("Retry-After")
	writeRefusal(ctx, refuseInternal)
}

// preReadChecked marks a request whose pre-read checks the Expect handler already ran.
type preReadChecked struct{}

// expect runs, for a request that sent Expect: 100-continue, every refusal that needs
// no body, so a request that will be refused gets its refusal instead of 100 Continue.
// It answers fasthttp.StatusContinue to go on.
func (e *Edge) expect(ctx *fasthttp.RequestCtx) int {
	if !ctx.IsPost() {
		return fasthttp.StatusContinue // Handle answers it without reading a body
	}
	if e.guard != nil {
		if r := e.checkRoute(ctx); r != nil {
			e.refuseEarly(ctx, r)
			return r.Status
		}
	}
	rq := request{ctx: ctx, start: time.Now()}
	err := e.resolveSource(&rq)
	if err == nil {
		err = e.checkBeforeRead(&rq)
	}
	if err == nil {
		if r := e.budget.check(e.budget.slot(ctx.RemoteAddr()), int64(max(ctx.Request.Header.ContentLength(), 0))); r != nil {
			err = r
		}
	}
	if err != nil {
		r, _ := refusalOf(err)
		e.refuseEarly(ctx, r)
		return r.Status
	}
	ctx.SetUserValue(preReadChecked{}, true)
	return fasthttp.StatusContinue
}

// request is one POST as it moves through the steps of ingest. It lives on the
// handler's stack; body and hdrs are views into the pooled scratch, valid until the
// request is answered.
type request struct {
	ctx    *fasthttp.RequestCtx
	sc     *scratch
	start  time.Time
	src    *Source
	tenant string
	body   []byte
	hdrs   []store.Header
	// flagged: verification failed under on_verify_failure accept_flag.
	flagged bool
	// verification is what the verifier said, stored with the hook for every sink to see.
	verification store.Verification
	dedupeKey    string
	dedupeTTL    time.Duration
	// id is the hook's id once minted: at admission, or earlier when a fleet claim names it.
	id [16]byte
	// res is the body bytes this request holds of the read budget until it is answered.
	res reservation
	// read is when the body was read: the record deadline runs from it, so a slow upload
	// within http.read_timeout_ms is not a deadline miss.
	read time.Time
}

// ending is how a request that was not refused ends: committed, duplicate or
// quarantined. The zero value means "go on to the next step".
type ending struct {
	outcome string // telemetry.OutcomeCommitted, telemetry.OutcomeDuplicate or outcomeQuarantined
	id      [16]byte
	reason  string // the verification failure of a quarantined hook
}

const (
	outcomeQuarantined = "quarantined"
	// outcomeHandshake: a provider handshake was answered (handshake.go); nothing was stored.
	outcomeHandshake = "handshake"
)

// ingest runs the steps of one POST in the order the design fixes: everything that can
// refuse before the body is read first, then the bounded read, then verification,
// admission and the commit. Only a committed record is answered 201. A step either
// goes on, ends the request (ending) or refuses it (an error, mapped by refusalOf).
// Refusals before the body is read count only their reason: the source is not yet
// authenticated.
func (e *Edge) ingest(ctx *fasthttp.RequestCtx) {
	rq := request{ctx: ctx, start: time.Now()}
	if err := e.resolveSource(&rq); err != nil {
		e.refuseEarly(ctx, err)
		return
	}
	if ctx.UserValue(preReadChecked{}) == nil {
		if err := e.checkBeforeRead(&rq); err != nil {
			e.refuseEarly(ctx, err)
			return
		}
	} else {
		// One request's mark; fasthttp resets it too, this does not rely on that.
		ctx.RemoveUserValue(preReadChecked{})
	}
	rq.res = reservation{b: e.budget, slot: e.budget.slot(ctx.RemoteAddr())}
	defer rq.res.done()
	if r := rq.res.ensure(int64(max(ctx.Request.Header.ContentLength(), 0))); r != nil {
		e.refuseEarly(ctx, r)
		return
	}
	rq.sc = e.scratch.Get().(*scratch)
	rq.sc.ctx = ctx
	defer e.putScratch(rq.sc)
	if err := e.readBody(&rq); err != nil {
		e.refuseEarly(ctx, err)
		return
	}
	end, err := e.afterRead(&rq)
	e.respond(&rq, end, err)
}

// afterRead runs the steps that need the body: verification and the failure policy,
// the dedupe key, kept headers and tenant quota, the dedupe fast path, admission and
// the commit.
func (e *Edge) afterRead(rq *request) (ending, error) {
	if done, err := e.handshakePOST(rq); done {
		return ending{outcome: outcomeHandshake}, err
	}
	if end, err := e.verifyTrust(rq); end.outcome != "" || err != nil {
		return end, err
	}
	end, err := e.commitVerified(rq)
	if err != nil && rq.flagged {
		// A flagged hook spent its source's quarantine token; refused here it was not
		// stored, and a refusal that stores nothing spends no token (as the pen's own
		// failed writes).
		e.limits.penBuckets.Refund(rq.src.ID, e.limits.quarantine, 1)
	}
	return end, err
}

// commitVerified runs the steps after verification's verdict: the URL tenant, the
// hook's derived fields and tenant quota, the dedupe fast path, admission and commit.
func (e *Edge) commitVerified(rq *request) (ending, error) {
	if err := e.mintURLTenant(rq.src, rq.tenant); err != nil {
		return ending{}, err
	}
	if e.fleet != nil && !rq.flagged {
		return e.commitFleet(rq)
	}
	if err := e.prepare(rq); err != nil {
		return ending{}, err
	}
	if e.direct == nil {
		// Under wal.type none nothing writes the dedupe index (docs/delivery.md, "Direct mode").
		if end, err := e.seenBefore(rq); end.outcome != "" || err != nil {
			return end, err
		}
	}
	return e.admitAndCommit(rq)
}

// resolveSource finds the route's source and the tenant the hook belongs to.
func (e *Edge) resolveSource(rq *request) error {
	ctx := rq.ctx
	route, ok := e.resolver.Resolve(ctx.Path())
	if !ok {
		return ErrUnknownSource
	}
	if cl := ctx.Request.Header.ContentLength(); cl > 0 && int64(cl) > e.set.MaxBodyBytes {
		return refuseTooLarge(e.set.MaxBodyBytes)
	}
	src, err := e.sources.Lookup(route.Source)
	if err != nil {
		if !errors.Is(err, ErrUnknownSource) {
			e.log.Warn().Err(err).Msg("source store cannot answer")
		}
		return err
	}
	rq.src, rq.tenant = src, src.Tenant
	if route.Tenant != nil {
		if rq.tenant, err = e.urlTenant(src, route.Tenant); err != nil {
			return err
		}
	}
	return nil
}

// checkBeforeRead runs the framing check, the pre-read admission (rates, the tenant's
// body cap) and the header check: everything that can refuse before a body byte is read.
func (e *Edge) checkBeforeRead(rq *request) error {
	if m := e.closed.Load(); m != nil {
		if _, ok := (*m)[rq.tenant]; ok {
			return refuseTenantErasing
		}
	}
	if !framed(&rq.ctx.Request.Header) {
		return refuseLengthRequired
	}
	if r := e.preRead(rq.ctx, rq.src, rq.tenant, rq.start); r != nil {
		return r
	}
	if r := checkHeaders(&rq.ctx.Request.Header); r != nil {
		return r
	}
	if r := rq.src.Trust.AdmitVerification(rq.start); r != nil {
		return r
	}
	return nil
}

// maxPooledBody is the largest body buffer a scratch keeps when it returns to the pool:
// one large upload must not pin its buffer for the life of the process.
const maxPooledBody = 1 << 20

func (e *Edge) putScratch(sc *scratch) {
	sc.ctx = nil
	if cap(sc.body) > maxPooledBody {
		sc.body = make([]byte, 0, 16<<10)
	}
	if sc.pending != nil && cap(sc.pending.Value) > maxPooledBody {
		sc.pending = nil
	}
	e.scratch.Put(sc)
}

// readBody reads the body into the scratch, within the tenant's cap.
func (e *Edge) readBody(rq *request) error {
	maxBody := e.tenantMaxBody(rq.tenant)
	body, err := readBody(rq.ctx, maxBody, rq.sc.body[:0], &rq.res)
	rq.sc.body = body[:0]
	rq.read = time.Now()
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return refuseTooLarge(maxBody)
		}
		if r, ok := err.(*RefusedError); ok {
			return r // the read budget
		}
		e.log.Debug().Str("error", redactMessage(err.Error())).Msg("request body could not be read")
		return refuseBodyRead
	}
	if r := e.chargeRead(rq.ctx, rq.src, len(body), rq.start); r != nil {
		return r
	}
	rq.body = body
	return nil
}

// verifyTrust verifies the request and applies the source's on_verify_failure policy:
// reject refuses, quarantine ends the request in the pen, accept_flag goes on flagged.
// Verification reads the exact bytes and every header, before store_headers drops any.
func (e *Edge) verifyTrust(rq *request) (ending, error) {
	ctx, sc, src := rq.ctx, rq.sc, rq.src
	trust := src.Trust
	// The request lives in the scratch: passed to the verifier interface it would escape, one allocation a hook.
	vreq := &sc.vreq
	*vreq = verify.Request{Body: rq.body, Header: sc.header, Query: sc.query, RawQuery: ctx.URI().QueryString(), Now: rq.start}
	if trust.PeerCert {
		if st := ctx.TLSConnectionState(); st != nil && len(st.PeerCertificates) > 0 {
			vreq.PeerCert = st.PeerCertificates[0]
		}
	}
	vres := trust.Verify(rq.tenant, vreq)
	*vreq = verify.Request{} // the body and certificate are not kept past the request
	if vres.WeakHash {
		e.tel.WeakHash(src.ID, vres.Scheme)
	}
	switch vres.Status {
	case verify.StatusOK:
		rq.verification = store.VerificationOK
		return ending{}, nil
	case verify.StatusSkipped:
		rq.verification = store.VerificationSkipped
		return ending{}, nil
	}
	e.tel.VerifyFailed(src.ID, vres.Provider, vres.Scheme)
	switch trust.OnFailure {
	case config.OnVerifyAcceptFlag:
		// Stored anyway, flagged; it spends the source's quarantine bucket, so a forged
		// flood is bounded, and it gets no dedupe key, so it cannot suppress the real event.
		if ok, wait := e.limits.penBuckets.Take(src.ID, rq.start, e.limits.quarantine, 1); !ok {
			return ending{}, refuse429("quarantine_rate_limited", wait)
		}
		rq.flagged, rq.verification = true, store.VerificationFailed
		return ending{}, nil
	case config.OnVerifyQuarantine:
		if ok, wait := e.limits.penBuckets.Take(src.ID, rq.start, e.limits.quarantine, 1); !ok {
			return ending{}, refuse429("quarantine_rate_limited", wait)
		}
		return e.toPen(rq, verifyReason(vres.Reason))
	default:
		return ending{}, refuseVerification(vres.Reason)
	}
}

// toPen writes a request that failed verification to the quarantine pen.
func (e *Edge) toPen(rq *request, reason string) (ending, error) {
	ctx, sc := rq.ctx, rq.sc
	hdrs := collectHeaders(&ctx.Request.Header, sc)
	hdrs, sc.hashed = rq.src.Trust.Headers.Apply(hdrs, sc.hashed[:0])
	entry := store.QuarantineEntry{
		Hook: store.Hook{ID: newID(rq.start), ReceivedAt: rq.start.UnixMilli(), Tenant: rq.tenant, Source: rq.src.ID,
			ContentType: string(ctx.Request.Header.ContentType()), Headers: cloneHeaders(hdrs), Body: bytes.Clone(rq.body)},
		Method: string(ctx.Method()), Path: string(ctx.Path()), Reason: reason,
	}
	if r := e.quarantine(entry); r != nil {
		return ending{}, r
	}
	return ending{outcome: outcomeQuarantined, reason: reason}, nil
}

// prepare derives what the stored hook carries besides its body (dedupe key, kept
// headers) and charges the tenant's quota, now that the request is verified. A flagged
// hook is not charged: it already spent its source's quarantine bucket, and a forged
// flood must never spend the tenant's budget (design: "a flood of forged requests spends
// no budget and can never lock a tenant out").
func (e *Edge) prepare(rq *request) error {
	e.derive(rq)
	if rq.flagged {
		return nil
	}
	if r := e.chargeTenant(rq.tenant, int64(len(rq.body)), rq.start); r != nil {
		e.rateLimited(rq)
		return r
	}
	return nil
}

// derive sets the hook's dedupe key and kept headers.
func (e *Edge) derive(rq *request) {
	trust := rq.src.Trust
	if trust.Dedupe != nil && !rq.flagged {
		rq.dedupeKey, rq.dedupeTTL = trust.Dedupe.Key(rq.sc.header, rq.body), trust.Dedupe.TTL()
	}
	hdrs := collectHeaders(&rq.ctx.Request.Header, rq.sc)
	rq.hdrs, rq.sc.hashed = trust.Headers.Apply(hdrs, rq.sc.hashed[:0])
}

// rateLimited counts a hook refused by its tenant's quota, under a label /metrics can bound.
func (e *Edge) rateLimited(rq *request) {
	label := "other"
	if _, ok := e.limits.cfg.Tenants[rq.tenant]; ok || rq.tenant == rq.src.Tenant || e.limits.overridden(rq.tenant) {
		label = rq.tenant
	}
	e.tel.RateLimited(label)
}

// seenBefore is the dedupe fast path: a provider retry of a committed event is answered
// without queueing. The writer re-checks every key anyway, so a read that predates
// another partition's commit still ends as a duplicate.
func (e *Edge) seenBefore(rq *request) (ending, error) {
	if rq.dedupeKey == "" {
		return ending{}, nil
	}
	db := e.db()
	if db == nil {
		return ending{}, nil
	}
	if e.intake != nil && e.intake.Recovering() {
		return ending{}, refuseRecovering
	}
	orig, dup, err := db.LookupDedupe(rq.tenant, rq.src.ID, rq.dedupeKey, rq.start)
	switch {
	case err != nil:
		return ending{}, fmt.Errorf("%w: %w", errDedupeLookup, err)
	case dup && e.intake != nil && e.intake.PendingID(orig):
		return ending{}, e.intakeRefusal(store.ErrIntakePending)
	case dup:
		return ending{outcome: telemetry.OutcomeDuplicate, id: orig}, nil
	}
	return ending{}, nil
}

// admitAndCommit reserves room in the tenant's share and the record's partition, then
// commits, or under wal.type none publishes; the room is given back once the record is
// answered, so the same bounds hold the publishes in flight.
func (e *Edge) admitAndCommit(rq *request) (ending, error) {
	size := int64(len(rq.body))
	share, ok := e.admitTenant(rq.tenant, size)
	if !ok {
		return ending{}, refuseTenantOverload
	}
	defer share.release(size)
	if rq.id == ([16]byte{}) {
		rq.id = newID(rq.start)
	}
	id := rq.id
	p := e.partitionOf(rq.src.ID, id)
	part := &e.parts[p]
	if !part.admit(size, e.set.MaxQueue, e.set.MaxQueueBytes) {
		e.tel.LoadShed()
		return ending{}, refuseOverload
	}
	defer part.release(size)
	if e.direct != nil {
		return e.publish(rq, id)
	}
	return e.commit(rq, id, p)
}

// publish is the commit step under wal.type none: the hook goes to every sink of its
// source and is answered 201 only once all of them confirmed (direct.go).
func (e *Edge) publish(rq *request, id [16]byte) (ending, error) {
	rt := e.direct.routes[rq.src.ID]
	if rt == nil {
		return ending{}, errNoRoute
	}
	env := rt.envelope(&store.Hook{
		ID: id, ReceivedAt: rq.start.UnixMilli(), Tenant: rq.tenant, Source: rq.src.ID,
		ContentType: string(rq.ctx.Request.Header.ContentType()), Headers: rq.hdrs, Body: rq.body,
		Flagged: rq.flagged, DedupeKey: rq.dedupeKey, Verification: rq.verification,
	})
	if err := e.direct.publish(rt, &env); err != nil {
		return ending{}, err
	}
	return ending{outcome: telemetry.OutcomeCommitted, id: id}, nil
}

// commit hands the encoded record to its partition's batcher and waits for the group
// commit, or the record's deadline.
func (e *Edge) commit(rq *request, id [16]byte, p int) (ending, error) {
	src := rq.src
	hook := store.Hook{
		ID: id, ReceivedAt: rq.start.UnixMilli(), Tenant: rq.tenant, Source: src.ID,
		ContentType: view(rq.ctx.Request.Header.ContentType()),
		Headers:     rq.hdrs, Body: rq.body, Flagged: rq.flagged, DedupeKey: rq.dedupeKey,
		Verification: rq.verification,
	}
	rec := rq.sc.takePending()
	rec.Record = store.Record{
		ID: id, Tenant: rq.tenant, Source: src.ID, ReceivedAt: hook.ReceivedAt, Size: uint32(len(rq.body)),
		Value: store.AppendHook(rec.Value[:0], &hook),
		Sinks: src.Sinks, Archive: e.set.Archive, DedupeKey: rq.dedupeKey, DedupeTTL: rq.dedupeTTL,
	}
	crashed := e.outage.Load().ch // loaded before the send: a crash after it must reach this record
	e.system.Root.Send(e.batchers[p], rec.Envelope())

	res, ok := e.wait(rec, rq.sc, e.set.RecordDeadline-time.Since(rq.read), crashed)
	rq.sc.keepPending(rec)
	switch {
	case !ok:
		return ending{}, errDeadline
	case res.Err != nil:
		var quota *store.DedupeQuotaError
		if errors.As(res.Err, &quota) {
			e.tel.QuotaRefused(src.ID, quota.Scope)
		}
		if e.intake != nil {
			return ending{}, e.intakeRefusal(res.Err)
		}
		return ending{}, res.Err
	case res.Duplicate:
		return ending{outcome: telemetry.OutcomeDuplicate, id: res.OriginalID}, nil
	}
	return ending{outcome: telemetry.OutcomeCommitted, id: id}, nil
}

// respond writes the answer of a request that got past the body read and counts it
// under its source and outcome.
func (e *Edge) respond(rq *request, end ending, err error) {
	outcome := end.outcome
	if err != nil {
		var r *RefusedError
		r, outcome = refusalOf(err)
		writeRefusal(rq.ctx, r)
	} else {
		switch end.outcome {
		case telemetry.OutcomeCommitted:
			e.accepted(rq.ctx, rq.sc, end.id)
		case telemetry.OutcomeDuplicate:
			e.duplicate(rq.ctx, rq.sc, end.id)
		case outcomeQuarantined:
			rq.ctx.SetStatusCode(fasthttp.StatusAccepted)
			rq.ctx.SetContentType("application/json")
			rq.ctx.SetBodyString(`{"status":"quarantined","reason":"` + end.reason + `"}`)
		}
	}
	e.tel.Ingest(rq.src.ID, outcome, time.Since(rq.start))
}

// wait blocks until the record's group returns or its deadline passes. At the deadline
// a record whose group has not started is expired (never committed) and false is
// returned; a record whose group started is waited out, because a started group is
// never abandoned and may commit. A crash of the writer or a batcher (crashed closes) is
// answered like a stopped batcher, at once, unless the record's group started.
func (e *Edge) wait(rec *store.Pending, sc *scratch, d time.Duration, crashed <-chan struct{}) (store.Result, bool) {
	if d <= 0 {
		d = time.Nanosecond
	}
	sc.timer.Reset(d)
	defer sc.timer.Stop()
	select {
	case res := <-rec.Done:
		return res, true
	case <-crashed:
		if rec.Expire() {
			return store.Result{Err: ErrBatcherStopped}, true
		}
		return <-rec.Done, true
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

// refuseEarly answers a request refused before its body was read; only the reason is
// counted, never the (unauthenticated) source.
func (e *Edge) refuseEarly(ctx *fasthttp.RequestCtx, err error) {
	r, _ := refusalOf(err)
	e.tel.Refused(r.Reason)
	writeRefusal(ctx, r)
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
	body := `{"status":"` + status + `","instance":` + jsonString(e.set.Instance) + `,"store":"` + st + `"`
	if watched, failing := e.health.Sinks(time.Now()); watched {
		body += sinksCheckJSON(failing)
	}
	if e.health.intake.Load() != nil {
		if r := e.health.intakeNotReady(); r != "" {
			body += `,"intake":"failing","reasons":{"intake":"` + r + `"}`
		} else {
			body += `,"intake":"ok"`
		}
	}
	ctx.SetBodyString(body + "}")
}

// sinksCheckJSON is the sinks check's part of a /ready body (with its leading comma):
// "sinks":"ok", or "failing" with the failing sinks under reasons.sinks.
func sinksCheckJSON(failing []FailingSink) string {
	if len(failing) == 0 {
		return `,"sinks":"ok"`
	}
	b, _ := json.Marshal(failing) // plain strings and ints always marshal
	return `,"sinks":"failing","reasons":{"sinks":` + string(b) + `}`
}

// framed reports whether a request says where its body ends: a Content-Length or
// chunked transfer coding. fasthttp reads a request with neither as an empty body
// (ContentLength -2 until then, 0 after), which would store an empty hook; the design
// answers 411. Only a zero length needs the raw head checked, so the common case costs
// nothing.
func framed(h *fasthttp.RequestHeader) bool {
	switch cl := h.ContentLength(); {
	case cl == -2:
		return false
	case cl != 0:
		return true
	}
	raw := h.RawHeaders()
	return hasHeaderLine(raw, "content-length:") || hasHeaderLine(raw, "transfer-encoding:")
}

// hasHeaderLine reports whether the raw head holds a line starting with name (lower
// case, with its colon), compared without regard to case.
func hasHeaderLine(raw []byte, name string) bool {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) >= len(name) && strings.EqualFold(view(line[:len(name)]), name) {
			return true
		}
	}
	return false
}

var errTooLarge = errors.New("edge: body over max_body_bytes")

// readBody reads the request body into dst, never more than max bytes: a chunked body
// has no length to check up front, so the cap is enforced as it streams. The buffer
// never grows past what res holds of the read budget.
func readBody(ctx *fasthttp.RequestCtx, max int64, dst []byte, res *reservation) ([]byte, error) {
	r := ctx.RequestBodyStream()
	if r == nil {
		b := ctx.Request.Body()
		if int64(len(b)) > max {
			return dst, errTooLarge
		}
		if ref := res.ensure(int64(len(b))); ref != nil {
			return dst, ref
		}
		return append(dst, b...), nil
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
			if ref := res.ensure(int64(cap(dst))); ref != nil {
				return dst, ref
			}
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
