package dispatch

import (
	"context"
	"fmt"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/store"
)

// The claim check in dispatch (inventory D.5). A hook whose body is longer than the smallest inline_max_bytes
// among its source's sinks is checked in once, before the first attempt of any of its queue sinks, and the ref
// is recorded in the store (the claim marker, keyed by seq): every sink of the hook, every retry and every
// attempt after a restart reads it there and carries the same claim. HTTP sinks never claim.
//
// Each hook gets a one-claim pack whose id follows from the hook (sinks.ClaimCheckIn), not a pack per batch of
// rows: check-ins happen in the attempts, which run per row in the lanes, and packing several hooks would make
// the first attempt of each wait for the others. The derived id is what makes a check-in repeated after a crash
// (pack written, marker lost) overwrite its pack instead of leaving a second one, and bodies this large are
// already worth an object of their own.
//
// Two sinks of one hook attempted at once share one check-in: the first becomes the leader, the others wait
// for its ref. A failed check-in fails the attempt as transient (retried), never permanent.

// claimCall is one check-in in progress; done closes when ref or err is set.
type claimCall struct {
	done chan struct{}
	ref  string
	err  error
}

// SetClaimCheck installs the claim check-in; call it before the scheduler starts. Without one, a body over a
// sink's inline limit reaches the sink unclaimed and the sink refuses it as permanent.
func (d *Dispatcher) SetClaimCheck(fn sinks.ClaimCheckIn) { d.claim = fn }

// needsClaim tells whether an attempt of r must carry a claim for a body of n bytes of source.
func (d *Dispatcher) needsClaim(source string, r route, n int) bool {
	if d.claim == nil {
		return false
	}
	if _, ok := r.sink.(sinks.InlineLimiter); !ok {
		return false
	}
	limit, ok := d.claimAt[source]
	return ok && n > limit
}

// claimRef returns hook seq's claim ref: the recorded one, else the ref of a check-in made now (or by the
// attempt of a sibling sink already making it) and recorded.
func (d *Dispatcher) claimRef(ctx context.Context, db Store, seq uint64, env *sinks.Envelope) (string, error) {
	if ref, ok, err := db.ClaimRef(seq); err != nil || ok {
		return ref, err
	}
	d.claimMu.Lock()
	if call, ok := d.claiming[seq]; ok {
		d.claimMu.Unlock()
		select {
		case <-call.done:
			return call.ref, call.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	call := &claimCall{done: make(chan struct{})}
	d.claiming[seq] = call
	d.claimMu.Unlock()
	defer func() {
		d.claimMu.Lock()
		delete(d.claiming, seq)
		d.claimMu.Unlock()
		close(call.done)
	}()
	// A leader that finished between the read above and the registration has recorded its ref by now.
	ref, ok, err := db.ClaimRef(seq)
	if err != nil || ok {
		call.ref, call.err = ref, err
		return ref, err
	}
	ref, err = d.claim(ctx, env)
	if err != nil {
		call.err = fmt.Errorf("cannot check the body in: %w", err)
		return "", call.err
	}
	if err := db.PutClaimRef(seq, ref); err != nil {
		// The ref is good: this attempt carries it. A later one checks in again and, the pack id following
		// from the hook, gets the same ref.
		d.log.Warn().Err(err).Uint64("seq", seq).Msg("cannot record a hook's claim ref")
	}
	call.ref = ref
	return ref, nil
}

var _ Store = (*store.DB)(nil)
