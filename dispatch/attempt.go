package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/httpsink"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
)

// attempt runs one delivery of c through r and settles the row in the store: completed,
// rescheduled (a retry is a row due later, holding no slot) or buried. It never panics
// on a sink's behalf: a raising sink is a transient failure. early, when not nil, is
// called with a delivered row's outcome before the row is settled.
func (d *Dispatcher) attempt(c store.Claimed, r route, early func(outcome)) outcome {
	db := d.db()
	if db == nil {
		return outcome{result: telemetry.ResultError, class: classLost, reason: "store closed"}
	}
	// The store paces its outcome groups by the attempts still running: their outcomes join one write.
	db.BeginAttempt()
	defer db.EndAttempt()
	// The claim read the hook with the row; a claim that could not is read here.
	hook := c.Hook
	c.Hook = nil // the outcome needs only the row; a retry claims the hook again
	if hook == nil {
		h, err := db.GetHook(c.Seq)
		if err != nil {
			// A row whose hook cannot be read is dead-lettered with the reason, never dropped.
			return d.settle(db, &c, r, outcome{result: telemetry.ResultDLQ, class: classPermanent, attempts: c.Row.Attempts,
				reason: "hook unreadable: " + err.Error()}, 0)
		}
		hook = &h
	}
	env := sinks.Envelope{
		ID: hook.ID, Source: hook.Source, Tenant: hook.Tenant, ReceivedAt: hook.ReceivedAt, ContentType: hook.ContentType,
		Body: hook.Body, DedupeKey: hook.DedupeKey, ReplayID: c.Row.ReplayID, Flagged: hook.Flagged,
		Verification: hook.Verification.String(), Attempt: int(c.Row.Attempts) + 1,
	}
	env.IDText = env.Text()
	if len(hook.Headers) > 0 {
		hs := make([]sinks.Header, len(hook.Headers))
		for i, h := range hook.Headers {
			hs[i] = sinks.Header{Name: h.Name, Value: h.Value}
		}
		env.Headers = r.forward.Headers(hs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), d.set.AttemptTimeout)
	start := d.now()
	var err, claimErr error
	status := 0 // what the destination answered, when it speaks HTTP
	if d.needsClaim(hook.Source, r, len(hook.Body)) {
		env.Claim, claimErr = d.claimRef(ctx, db, c.Seq, &env)
	}
	if claimErr == nil {
		status, err = sinks.SafeDeliverAnswered(ctx, r.sink, &env)
	} else {
		// Inventory D.5: a failed check-in fails the attempt; the row is retried like any other, never buried
		// at once (its error carries no class, so Classify calls it transient).
		err = claimErr
	}
	timedOut := err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
	cancel()
	took := d.now().Sub(start)
	attempts := c.Row.Attempts + 1

	c.Last = store.Attempt{Number: attempts, StartedAt: start.UnixMilli(),
		LatencyUS: uint32(min(max(took.Microseconds(), 0), math.MaxUint32)), Class: store.AttemptOK}
	if status > 0 && status <= math.MaxUint16 {
		c.Last.Status = uint16(status)
	}

	var o outcome
	switch {
	case err == nil:
		o = outcome{result: telemetry.ResultOK, class: classOK, attempts: attempts}
	default:
		class, retryAfter := sinks.Classify(err)
		reason := fmt.Sprintf("{sink, %s, %s}", r.typ, err.Error())
		if claimErr != nil {
			reason = fmt.Sprintf("{claim_check, %s, %s}", r.typ, claimErr.Error())
		}
		c.Last.Class, c.Last.Error = store.AttemptTransient, reason
		if se := (*httpsink.StatusError)(nil); c.Last.Status == 0 && errors.As(err, &se) && se.Code > 0 && se.Code <= math.MaxUint16 {
			c.Last.Status = uint16(se.Code)
		}
		if timedOut {
			reason = fmt.Sprintf("{sink, %s, {attempt_timeout, %d}}", r.typ, d.set.AttemptTimeout.Milliseconds())
			c.Last.Class, c.Last.Error = store.AttemptTimeout, reason
		}
		if class == sinks.PermanentClass {
			c.Last.Class = store.AttemptPermanent
			o = outcome{result: telemetry.ResultDLQ, class: classPermanent, attempts: attempts, reason: reason}
			break
		}
		delay, ok := r.policy.NextAttempt(int(attempts), retryAfter, d.uniform())
		if !ok {
			o = outcome{result: telemetry.ResultDLQ, class: classTransient, attempts: attempts,
				reason: fmt.Sprintf("gave up after %d attempts: %s", attempts, reason)}
			break
		}
		o = outcome{result: telemetry.ResultRetry, class: classTransient, attempts: attempts,
			next: d.now().Add(delay).UnixMilli(), reason: reason}
		if timedOut {
			d.tel.Attempt(r.typ, telemetry.ResultTimeout, took, false, 0, false)
			return d.settle(db, &c, r, o, -1)
		}
	}
	if early != nil && o.result == telemetry.ResultOK {
		early(o)
	}
	return d.settle(db, &c, r, o, took)
}

// settle writes the outcome to the store and records it. took < 0 means the attempt was
// already recorded (a timeout).
func (d *Dispatcher) settle(db Store, c *store.Claimed, r route, o outcome, took time.Duration) outcome {
	now := d.now()
	var err error
	switch {
	case o.result == telemetry.ResultOK:
		err = db.Complete(c)
	case o.result == telemetry.ResultDLQ:
		err = db.Bury(c, o.attempts, o.reason, now.UnixMilli())
	case !d.sourceKnown(c.Row.Source):
		// The source was deleted while this attempt ran (DELETE ?deliveries=dead_letter buried its waiting
		// rows): a retry would wait for nothing, so the row joins them in the DLQ.
		o.result, o.class = telemetry.ResultDLQ, classTransient
		o.reason = store.SourceGoneReason(c.Row.Source)
		err = db.Bury(c, o.attempts, o.reason, now.UnixMilli())
	default:
		err = db.Reschedule(c, o.attempts, o.next, o.reason)
	}
	if err != nil {
		// The row stays claimed: the next start puts it back as due (at-least-once).
		d.log.Error().Err(err).Uint64("seq", c.Seq).Msg("cannot record delivery outcome")
		return outcome{result: telemetry.ResultError, class: classLost, attempts: o.attempts, reason: err.Error()}
	}
	if took >= 0 {
		settled := o.result == telemetry.ResultOK || o.result == telemetry.ResultDLQ
		age := now.Sub(time.UnixMilli(receivedAt(c)))
		d.tel.Attempt(r.typ, o.result, took, settled, age, c.Row.ReplayID != "")
	}
	if o.result == telemetry.ResultDLQ {
		d.tel.DeadLettered(c.Row.Source, r.typ, o.reason)
	}
	return o
}

// receivedAt is when the hook arrived, as far as the row knows: its first due time.
func receivedAt(c *store.Claimed) int64 {
	if c.Row.ReceivedAt != 0 {
		return c.Row.ReceivedAt
	}
	return c.Row.DueAt
}
