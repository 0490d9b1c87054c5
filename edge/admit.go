package edge

import (
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/config"
)

// limiterKeys bounds each keyed limiter: a flood from many addresses cannot grow memory
// without bound (past it, new keys are refused until old ones refill).
const limiterKeys = 1 << 17

// limits is the edge's rate limiting and tenant shares. A forged request spends only the
// pre-read limits (per client address, per node, per source body bytes); the tenant's
// quota is charged after verification, so a forgery can never lock a tenant out.
type limits struct {
	cfg         config.RateLimits
	quarantine  Limit
	ip          *Limiter
	node        Bucket
	sourceBytes *Limiter
	tenantHooks *Limiter
	tenantBytes *Limiter
	penBuckets  *Limiter // per source: accept_flag (and quarantined) hooks spend it
	shares      map[string]*tenantShare
	// overrides are the runtime hooks/s limits of tenants (admin API, persisted in the store): they win over
	// the tenant's config entry and the default. Copy on write under overrideMu; read without a lock.
	overrides  atomic.Pointer[map[string]config.Rate]
	overrideMu sync.Mutex
}

// hookLimit is tenant's hooks/s limit: its runtime override, else its config entry, else the default.
func (l *limits) hookLimit(tenant string) (config.Rate, bool) {
	if m := l.overrides.Load(); m != nil {
		if r, ok := (*m)[tenant]; ok {
			return r, true
		}
	}
	return l.cfg.HookLimit(tenant)
}

// overridden reports whether tenant has a runtime override.
func (l *limits) overridden(tenant string) bool {
	m := l.overrides.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[tenant]
	return ok
}

// RateOverride returns tenant's runtime hooks/s override; ok is false when it has none.
func (e *Edge) RateOverride(tenant string) (r config.Rate, ok bool) {
	if m := e.limits.overrides.Load(); m != nil {
		r, ok = (*m)[tenant]
	}
	return r, ok
}

// SetRateOverride sets tenant's runtime hooks/s override (r nil removes it) and resets its bucket, so the
// next hook is charged under the new limit from a full bucket. It takes effect at once, without a restart.
func (e *Edge) SetRateOverride(tenant string, r *config.Rate) {
	l := e.limits
	l.overrideMu.Lock()
	defer l.overrideMu.Unlock()
	next := map[string]config.Rate{}
	if m := l.overrides.Load(); m != nil {
		next = maps.Clone(*m)
	}
	if r == nil {
		delete(next, tenant)
	} else {
		next[tenant] = *r
	}
	l.overrides.Store(&next)
	l.tenantHooks.Reset(tenant)
}

// SetRateOverrides replaces every runtime override (the store's, loaded at boot), resetting the bucket of
// each tenant whose override changed.
func (e *Edge) SetRateOverrides(all map[string]config.Rate) {
	l := e.limits
	l.overrideMu.Lock()
	defer l.overrideMu.Unlock()
	prev := map[string]config.Rate{}
	if m := l.overrides.Load(); m != nil {
		prev = *m
	}
	next := maps.Clone(all)
	if next == nil {
		next = map[string]config.Rate{}
	}
	for t, r := range next {
		if old, ok := prev[t]; !ok || old != r {
			l.tenantHooks.Reset(t)
		}
	}
	for t := range prev {
		if _, ok := next[t]; !ok {
			l.tenantHooks.Reset(t)
		}
	}
	l.overrides.Store(&next)
}

// tenantShare is one tenant's share of the batchers: its records and bytes buffered or
// in flight across partitions. Past it the tenant gets 429 tenant_overload and the
// partitions keep room for every other tenant.
type tenantShare struct {
	maxRecords, maxBytes int64
	records, bytes       atomic.Int64
}

func newLimits(cfg config.RateLimits, q config.Quarantine) *limits {
	l := &limits{
		cfg: cfg, quarantine: Limit{Rate: q.Rate, Burst: q.Burst},
		ip: NewLimiter(limiterKeys), sourceBytes: NewLimiter(limiterKeys), tenantHooks: NewLimiter(limiterKeys),
		tenantBytes: NewLimiter(limiterKeys), penBuckets: NewLimiter(limiterKeys), shares: map[string]*tenantShare{},
	}
	for t, tl := range cfg.Tenants {
		if tl.MaxQueue > 0 || tl.MaxQueueBytes > 0 {
			sh := &tenantShare{maxRecords: int64(tl.MaxQueue), maxBytes: tl.MaxQueueBytes}
			if sh.maxRecords == 0 {
				sh.maxRecords = 1 << 62
			}
			if sh.maxBytes == 0 {
				sh.maxBytes = 1 << 62
			}
			l.shares[t] = sh
		}
	}
	return l
}

func limitOf(r *config.Rate) Limit {
	if r == nil {
		return Limit{}
	}
	return Limit{Rate: r.Rate, Burst: r.Burst}
}

func retryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// preRead runs the admission a request meets after its source is known and before its
// body is read: per client address, per node, per source in body bytes, and the
// tenant's body cap.
func (e *Edge) preRead(ctx *fasthttp.RequestCtx, src *Source, tenant string, now time.Time) *RefusedError {
	l := e.limits
	if lim := limitOf(l.cfg.IP); !lim.Unlimited() {
		var key []byte
		if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
			key = IPKey(a.IP)
		}
		if ok, wait := l.ip.TakeBytes(key, now, lim, 1); !ok {
			return refuse429("ip_rate_limited", wait)
		}
	}
	if lim := limitOf(l.cfg.Node); !lim.Unlimited() {
		if ok, wait := l.node.Take(now, lim, 1); !ok {
			return refuse429("node_rate_limited", wait)
		}
	}
	cl := int64(max(ctx.Request.Header.ContentLength(), 0))
	if lim := limitOf(l.cfg.SourceBytes); !lim.Unlimited() && cl > 0 {
		if ok, wait := l.sourceBytes.Take(src.ID, now, lim, float64(cl)); !ok {
			return refuse429("source_rate_limited", wait)
		}
	}
	if tl, ok := l.cfg.Tenants[tenant]; ok && tl.MaxBodyBytes > 0 && cl > tl.MaxBodyBytes {
		return refuseTooLarge(tl.MaxBodyBytes)
	}
	return nil
}

// chargeRead charges the body bytes read to the source's rate_limits.source_bytes when
// preRead could not (no Content-Length: a chunked body), so every body read is charged
// once. The body was read already; a refusal keeps the next one out.
func (e *Edge) chargeRead(ctx *fasthttp.RequestCtx, src *Source, n int, now time.Time) *RefusedError {
	lim := limitOf(e.limits.cfg.SourceBytes)
	if lim.Unlimited() || n == 0 || ctx.Request.Header.ContentLength() > 0 {
		return nil
	}
	if ok, wait := e.limits.sourceBytes.Take(src.ID, now, lim, float64(n)); !ok {
		return refuse429("source_rate_limited", wait)
	}
	return nil
}

// tenantMaxBody is the body cap a tenant's stream read enforces.
func (e *Edge) tenantMaxBody(tenant string) int64 {
	if tl, ok := e.limits.cfg.Tenants[tenant]; ok && tl.MaxBodyBytes > 0 {
		return min(tl.MaxBodyBytes, e.set.MaxBodyBytes)
	}
	return e.set.MaxBodyBytes
}

// chargeTenant charges the tenant's hooks/s and bytes/s quota after verification.
func (e *Edge) chargeTenant(tenant string, size int64, now time.Time) *RefusedError {
	l := e.limits
	if r, ok := l.hookLimit(tenant); ok {
		if ok, wait := l.tenantHooks.Take(tenant, now, Limit{Rate: r.Rate, Burst: r.Burst}, 1); !ok {
			return refuse429("rate_limited", wait)
		}
	}
	if r, ok := l.cfg.ByteLimit(tenant); ok && size > 0 {
		if ok, wait := l.tenantBytes.Take(tenant, now, Limit{Rate: r.Rate, Burst: r.Burst}, float64(size)); !ok {
			return refuse429("rate_limited", wait)
		}
	}
	return nil
}

// admitTenant reserves room in the tenant's batcher share; release gives it back.
func (e *Edge) admitTenant(tenant string, size int64) (*tenantShare, bool) {
	sh := e.limits.shares[tenant]
	if sh == nil {
		return nil, true
	}
	if sh.records.Add(1) > sh.maxRecords {
		sh.records.Add(-1)
		return nil, false
	}
	if sh.bytes.Add(size) > sh.maxBytes {
		sh.bytes.Add(-size)
		sh.records.Add(-1)
		return nil, false
	}
	return sh, true
}

func (sh *tenantShare) release(size int64) {
	if sh != nil {
		sh.bytes.Add(-size)
		sh.records.Add(-1)
	}
}

// Sweep drops limiter keys that refilled; the limiter actor calls it every second.
func (e *Edge) Sweep(now time.Time) {
	l := e.limits
	for _, lim := range []*Limiter{l.ip, l.sourceBytes, l.tenantHooks, l.tenantBytes, l.penBuckets} {
		lim.Sweep(now)
	}
}

func refuse429(reason string, wait time.Duration) *RefusedError {
	return &RefusedError{Status: 429, Reason: reason, RetryAfter: retryAfterSeconds(wait)}
}
