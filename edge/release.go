package edge

import (
	"fmt"
	"strings"
	"time"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/verify"
)

// ReleaseReport says what a quarantine release did.
type ReleaseReport struct {
	Released   int // verified now and committed with their original id
	Duplicates int // verified, but their event was already stored: left the pen as skipped
	Held       int // still failing verification: kept in the pen
}

// ReleaseQuarantine re-verifies up to limit held hooks of source ("" = every source)
// against the source's current verifier, judging the timestamp window at each hook's
// received_at, and commits those that pass with their original id — the commit and the
// removal from the pen are one synced batch. It is the quarantine replay job's step.
// Under wal.type none a hook that passes is published to its source's sinks instead and
// leaves the pen once every sink confirmed; one a sink refused stays held (Held) for the
// next release.
func (e *Edge) ReleaseQuarantine(source string, limit int) (ReleaseReport, error) {
	var rep ReleaseReport
	db := e.db()
	if db == nil {
		return rep, store.ErrClosed
	}
	held, err := db.ListQuarantine(source, limit)
	if err != nil {
		return rep, err
	}
	for _, s := range held {
		entry, err := db.GetQuarantine(s.ReceivedAt, s.ID)
		if err != nil {
			return rep, err
		}
		src, err := e.sources.Lookup([]byte(entry.Hook.Source))
		if err != nil {
			rep.Held++ // the source is gone or unreadable: keep the hook, a later release may pass
			continue
		}
		h := entry.Hook
		header := func(name string) []byte {
			for _, x := range h.Headers {
				if strings.EqualFold(x.Name, name) {
					return []byte(x.Value)
				}
			}
			return nil
		}
		vreq := verify.Request{Body: h.Body, Header: header, Now: time.UnixMilli(h.ReceivedAt)}
		switch res := src.Trust.VerifierFor(h.Tenant).Verify(&vreq); res.Status {
		case verify.StatusOK:
			h.Verification = store.VerificationOK
		case verify.StatusSkipped:
			h.Verification = store.VerificationSkipped
		default:
			rep.Held++
			continue
		}
		var ttl time.Duration
		if src.Trust.Dedupe != nil {
			h.DedupeKey, ttl = src.Trust.Dedupe.Key(header, h.Body), src.Trust.Dedupe.TTL()
		}
		if e.direct != nil {
			released, err := e.releaseDirect(db, &h)
			if err != nil {
				return rep, err
			}
			if released {
				rep.Released++
			} else {
				rep.Held++
			}
			continue
		}
		rec := &store.Record{
			ID: h.ID, Tenant: h.Tenant, Source: h.Source, ReceivedAt: h.ReceivedAt, Size: uint32(len(h.Body)),
			Value: store.AppendHook(nil, &h), Sinks: src.Sinks, Archive: e.set.Archive, DedupeKey: h.DedupeKey, DedupeTTL: ttl,
		}
		out, err := db.ReleaseQuarantine(s.ReceivedAt, s.ID, rec)
		if err != nil {
			return rep, err
		}
		switch out.Status {
		case store.OutcomeDuplicate:
			rep.Duplicates++ // the store's pen usage dropped with the entry, in the same batch
		case store.OutcomeCommitted:
			rep.Released++
		default:
			rep.Held++ // refused (dedupe quota): stays in the pen
		}
	}
	return rep, nil
}

// releaseDirect publishes a released hook to its source's sinks (wal.type none) and, once
// all of them confirmed, deletes it from the pen. A failed publish keeps it held: the
// sinks that confirmed get it again on the next release, under the same id. A delete
// that fails after the publish is an error; the hook stays held and is published again.
func (e *Edge) releaseDirect(db *store.DB, h *store.Hook) (bool, error) {
	rt := e.direct.routes[h.Source]
	if rt == nil {
		return false, nil
	}
	env := rt.envelope(h)
	if err := e.direct.publish(rt, &env); err != nil {
		return false, nil
	}
	if _, _, err := db.PurgeQuarantine(h.Source, h.ID, h.ReceivedAt, h.ReceivedAt, 1); err != nil {
		return false, fmt.Errorf("edge: cannot remove a published hook from the pen: %w", err)
	}
	return true, nil
}
