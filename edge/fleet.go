package edge

import (
	"context"
	"errors"
	"time"

	"github.com/ankusa-go/ankusa/fleet"
	"github.com/ankusa-go/ankusa/telemetry"
)

// SetFleet makes the edge count in the fleet store (rate_limits.scope or dedupe.scope fleet). It is called
// before the listener starts.
func (e *Edge) SetFleet(f *fleet.Store) { e.fleet = f }

// commitFleet is commitVerified under fleet scope: one call to the fleet store takes the tenant quota and
// claims the event key pending, the hook is committed, and the claim is then made committed, or released
// when the commit failed. A call the store does not answer (breaker open, error, past fleet.timeout_ms) is
// not a refusal: the hook is limited and deduped by this node alone.
func (e *Edge) commitFleet(rq *request) (ending, error) {
	e.derive(rq)
	rq.id = newID(rq.start)
	req := fleet.Request{Tenant: rq.tenant, Size: int64(len(rq.body)), ID: rq.id}
	if e.set.FleetRates {
		if r, ok := e.limits.hookLimit(rq.tenant); ok {
			req.Hooks = fleet.Limit{Rate: r.Rate, Burst: r.Burst}
		}
		if r, ok := e.limits.cfg.ByteLimit(rq.tenant); ok {
			req.Bytes = fleet.Limit{Rate: r.Rate, Burst: r.Burst}
		}
	}
	if e.set.FleetDedupe && rq.dedupeKey != "" {
		req.Claim = fleet.Claim{Tenant: rq.tenant, Source: rq.src.ID, Key: rq.dedupeKey}
	}
	v, ok, err := e.fleet.Admit(&req)
	if !ok {
		if !errors.Is(err, fleet.ErrBreakerOpen) {
			e.log.Warn().Err(err).Msg("fleet store did not answer; this hook is limited and deduped by the node alone")
		}
		return e.commitLocal(rq)
	}
	if !e.set.FleetRates {
		if r := e.chargeTenant(rq.tenant, int64(len(rq.body)), rq.start); r != nil {
			e.rateLimited(rq)
			return ending{}, r
		}
	}
	switch {
	case v.Limited:
		e.rateLimited(rq)
		return ending{}, refuse429("rate_limited", v.RetryAfter)
	case v.Dedupe == fleet.Pending:
		return ending{}, refuseDedupePending
	case v.Dedupe == fleet.Committed:
		return ending{outcome: telemetry.OutcomeDuplicate, id: v.Original}, nil
	}
	end, err := e.dedupeAndCommit(rq)
	if req.Claim.Key != "" {
		e.settleClaim(req.Claim, rq, end, err)
	}
	return end, err
}

// commitLocal is the node-local path of a hook the fleet store did not answer.
func (e *Edge) commitLocal(rq *request) (ending, error) {
	if r := e.chargeTenant(rq.tenant, int64(len(rq.body)), rq.start); r != nil {
		e.rateLimited(rq)
		return ending{}, r
	}
	return e.dedupeAndCommit(rq)
}

// dedupeAndCommit runs the node's own dedupe fast path (under wal.type disk) and the commit.
func (e *Edge) dedupeAndCommit(rq *request) (ending, error) {
	if e.direct == nil {
		if end, err := e.seenBefore(rq); end.outcome != "" || err != nil {
			return end, err
		}
	}
	return e.admitAndCommit(rq)
}

// settleClaim makes the hook's pending claim committed under the id the provider was answered with (its own,
// or the original the node's index found), or releases it when nothing was stored. A settle that fails is
// left to the pending TTL: until then a retry is 409 dedupe_pending, never a second hook.
func (e *Edge) settleClaim(c fleet.Claim, rq *request, end ending, err error) {
	switch {
	case err != nil && e.intake != nil && e.intake.PendingID(rq.id):
		// Half-persisted under wal.type dual: the hook is held and will be completed, never undone, so its
		// claim stays pending (a retry elsewhere is 409 dedupe_pending) until its pending TTL.
		return
	case err != nil:
		err = e.fleet.Release(c, rq.id)
	case end.outcome == telemetry.OutcomeCommitted || end.outcome == telemetry.OutcomeDuplicate:
		ttl := rq.dedupeTTL
		if ttl <= 0 {
			ttl = time.Minute
		}
		err = e.fleet.Commit(c, rq.id, end.id, ttl)
	default:
		return
	}
	if err != nil && !errors.Is(err, fleet.ErrBreakerOpen) {
		e.log.Warn().Err(err).Msg("fleet dedupe claim not settled; it expires with its pending TTL")
	}
}

// CloseTenant makes every hook of tenant 503 tenant_erasing (a tenant erase has begun); OpenTenant ends it.
func (e *Edge) CloseTenant(tenant string) { e.setClosed(tenant, true) }

// OpenTenant takes hooks of tenant again.
func (e *Edge) OpenTenant(tenant string) { e.setClosed(tenant, false) }

// ForgetTenant drops what the edge holds of tenant in memory and, under fleet scope, its fleet buckets.
func (e *Edge) ForgetTenant(ctx context.Context, tenant string) error {
	e.limits.tenantHooks.Reset(tenant)
	e.limits.tenantBytes.Reset(tenant)
	if e.fleet != nil && e.set.FleetRates {
		return e.fleet.ForgetTenant(ctx, tenant)
	}
	return nil
}

func (e *Edge) setClosed(tenant string, closed bool) {
	e.closedMu.Lock()
	defer e.closedMu.Unlock()
	m := map[string]struct{}{}
	if old := e.closed.Load(); old != nil {
		for t := range *old {
			m[t] = struct{}{}
		}
	}
	if closed {
		m[tenant] = struct{}{}
	} else {
		delete(m, tenant)
	}
	if len(m) == 0 {
		e.closed.Store(nil)
		return
	}
	e.closed.Store(&m)
}
