package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/linxGnu/grocksdb"
)

// Tenant erase (seed: Tenant erase; inventory G.5). The default CF holds
//
//	m:erasing:<tenant> → the erase job's progress (EraseProgress), synced after each stage
//	m:erased:<tenant>  → the tombstone: unix ms of the erase, written with the job's last stage
//
// While m:erasing is present the tenant is closed (ingest 503 tenant_erasing, dispatch claims none of its
// rows); a node that restarts with one resumes the job at its stage.
const (
	erasingPrefix = "m:erasing:"
	erasedPrefix  = "m:erased:"
)

// TenantErased reports whether tenant's tombstone is in the store: its archived hooks are gone (410).
func (db *DB) TenantErased(tenant string) (bool, error) {
	var found bool
	err := db.read(func() error {
		v, err := db.getCF(cfDefault, []byte(erasedPrefix+tenant))
		found = v != nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("cannot read the tombstone of tenant %s: %w", tenant, err)
	}
	return found, nil
}

// EraseProgress is an erase job's synced state.
type EraseProgress struct {
	Tenant    string `json:"tenant"`
	Stage     string `json:"stage"` // EraseClosing, EraseRows, EraseSources, EraseClaims, EraseFleet, EraseCommit
	StartedAt int64  `json:"started_at"`
	Actor     string `json:"actor"`
	Client    string `json:"client,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Stages of an erase job, in order. A job resumed at boot starts again at its synced stage: each stage is
// idempotent (a second run over what the first removed finds nothing).
const (
	EraseClosing = "closing" // the tenant is closed; its running attempts are waited for
	EraseRows    = "rows"    // hooks, delivery rows, obligations, claim markers, dedupe keys, pen entries
	EraseSources = "sources" // the tenant's sources of a Redis source store (each an audited external change)
	EraseClaims  = "claims"  // the tenant's claim-check objects (claims/tenant=<t>/ in the claim blob store)
	EraseFleet   = "fleet"   // the tenant's fleet buckets (rate_limits.scope fleet)
	EraseCommit  = "commit"  // the tombstone and the audit row, one synced batch
)

// PutEraseProgress writes p synced (BeginErase and every stage).
func (db *DB) PutEraseProgress(p EraseProgress) error {
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return db.read(func() error {
		if err := db.rdb.PutCF(db.wo, db.cfs[cfDefault], []byte(erasingPrefix+p.Tenant), v); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
		return nil
	})
}

// ErasingTenants returns every erase job not finished (a boot resumes them).
func (db *DB) ErasingTenants() ([]EraseProgress, error) {
	var out []EraseProgress
	err := db.read(func() error {
		return db.scan(cfDefault, []byte(erasingPrefix), func(k, v []byte) error {
			var p EraseProgress
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("erase job %q: %w", k, ErrCorruptValue)
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// EraseOps are the default CF writes of an erase's last batch: the tombstone, and the job's progress deleted.
// The caller commits them with the tenant.delete audit row (CommitAudited).
func EraseOps(tenant string, at int64) []AuditOp {
	return []AuditOp{
		{Key: []byte(erasedPrefix + tenant), Value: binary.BigEndian.AppendUint64(nil, uint64(at))},
		{Key: []byte(erasingPrefix + tenant), Delete: true},
	}
}

// Erased is what EraseTenantRows removed.
type Erased struct {
	Hooks, Deliveries, Delivered, Obligations, ClaimMarkers, DedupeKeys, PenEntries, Sources, Routes int
	// ClaimRefs are the claim-check refs of the removed hooks (their objects live in the claim store).
	ClaimRefs []string
}

// EraseTenantRows removes, in one synced batch, every row of tenant in the store: its hooks with their delivery
// rows and delivered records, due, inflight and dead keys, archive obligations and claim markers, its dedupe keys (and their expiry
// keys and counts), its quarantine entries, its API-managed sources (persistent source store) and routes; its counters
// and ordinal are deleted. It holds every writer's lock (commits,
// dispatch outcomes, the pen), so no write interleaves, and reloads the in-memory counters from the batch's
// result. The tenant must be closed first (no commit and no claim of its rows), or rows may come back.
func (db *DB) EraseTenantRows(tenant string) (Erased, error) {
	var x Erased
	defer db.lockEveryWriter()()
	if db.closed {
		return x, ErrClosed
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	def, hooks, dels, index, pen := db.cfs[cfDefault], db.cfs[cfHooks], db.cfs[cfDeliveries], db.cfs[cfIndex], db.cfs[cfQuarantine]
	ord, hasOrd := db.ords[tenant]
	if hasOrd {
		for _, kind := range []byte{IndexDue, IndexInflight, IndexDead} {
			prefix := binary.BigEndian.AppendUint32([]byte{kind}, ord)
			if err := db.scan(cfIndex, prefix, func(k, _ []byte) error {
				wb.DeleteCF(index, bytes.Clone(k))
				return nil
			}); err != nil {
				return x, err
			}
		}
		// The ordinal goes with the tenant: a later hook of the same name gets a new one (ordinals only grow).
		wb.DeleteCF(def, appendCounterKey(nil, ord))
		wb.DeleteCF(def, []byte(tenantPrefix+tenant))
		if err := db.scan(cfDefault, binary.BigEndian.AppendUint32([]byte(lanePrefix), ord), func(k, _ []byte) error {
			wb.DeleteCF(def, bytes.Clone(k))
			return nil
		}); err != nil {
			return x, err
		}
	}
	var unmarked []uint64 // the seqs whose claim markers the batch deletes
	if err := db.scan(cfHooks, nil, func(k, v []byte) error {
		h, err := DecodeHook(v)
		if err != nil || h.Tenant != tenant {
			return nil // an undecodable hook is not known to be the tenant's
		}
		seq := binary.BigEndian.Uint64(k)
		wb.DeleteCF(hooks, bytes.Clone(k))
		x.Hooks++
		// Its delivery rows and the records of its delivered sinks: every key under its seq.
		if err := db.scan(cfDeliveries, AppendHookKey(nil, seq), func(dk, _ []byte) error {
			wb.DeleteCF(dels, bytes.Clone(dk))
			if _, ok := deliveredKeyOf(dk); ok {
				x.Delivered++
			} else {
				x.Deliveries++
			}
			return nil
		}); err != nil {
			return err
		}
		ak := append([]byte{IndexArchive}, AppendHookKey(nil, seq)...)
		if a, err := db.getCF(cfIndex, ak); err != nil {
			return err
		} else if a != nil {
			wb.DeleteCF(index, ak)
			x.Obligations++
		}
		ck := append([]byte{IndexClaim}, AppendHookKey(nil, seq)...)
		if c, err := db.getCF(cfIndex, ck); err != nil {
			return err
		} else if c != nil {
			wb.DeleteCF(index, ck)
			x.ClaimMarkers++
			unmarked = append(unmarked, seq)
			x.ClaimRefs = append(x.ClaimRefs, string(c))
		}
		return nil
	}); err != nil {
		return x, err
	}
	if x.Obligations > 0 {
		wb.PutCF(def, []byte(metaArchive), binary.BigEndian.AppendUint64(nil, uint64(max(db.qs.archive-int64(x.Obligations), 0))))
	}
	// Dedupe keys: 'u' keys sort by tenant then NUL, so the tenant's are one range.
	sources := map[string]int64{}
	if err := db.scan(cfIndex, append(append([]byte{IndexDedupe}, tenant...), 0), func(k, _ []byte) error {
		s, err := ParseDedupeKey(k)
		if err != nil || s.Tenant != tenant {
			return nil
		}
		wb.DeleteCF(index, bytes.Clone(k))
		sources[s.Source]++
		x.DedupeKeys++
		return nil
	}); err != nil {
		return x, err
	}
	// Expiry keys sort by time: every one is read, the tenant's deleted (a refreshed key leaves an old one).
	if err := db.scan(cfIndex, []byte{IndexDedupeExpiry}, func(k, _ []byte) error {
		if _, s, err := ParseDedupeExpiryKey(k); err == nil && s.Tenant == tenant {
			wb.DeleteCF(index, bytes.Clone(k))
		}
		return nil
	}); err != nil {
		return x, err
	}
	wb.DeleteCF(def, []byte(dedupeCountPrefix+tenant))
	for src, n := range sources {
		left := int64(0)
		if c := db.qs.dedupeSource[src]; c != nil {
			left = max(*c-n, 0)
		}
		if left == 0 {
			wb.DeleteCF(def, appendDedupeSourceCountKey(nil, src))
		} else {
			wb.PutCF(def, appendDedupeSourceCountKey(nil, src), binary.BigEndian.AppendUint64(nil, uint64(left)))
		}
	}
	// The tenant's runtime rate-limit override (inventory G.5).
	wb.DeleteCF(def, RateLimitKey(tenant))
	// API-managed sources of the persistent source store.
	// With each, its name's owner key (sources.Persistent: sn:<name> → tenant) when the tenant owns it.
	srcPrefix := append(append([]byte(sourcePrefix), tenant...), 0)
	if err := db.scan(cfDefault, srcPrefix, func(k, _ []byte) error {
		wb.DeleteCF(def, bytes.Clone(k))
		owner := append([]byte("sn:"), k[len(srcPrefix):]...)
		if v, err := db.getCF(cfDefault, owner); err != nil {
			return err
		} else if string(v) == tenant {
			wb.DeleteCF(def, owner)
		}
		x.Sources++
		return nil
	}); err != nil {
		return x, err
	}
	// The tenant's routes (routes.go): its index keys name them.
	rtPrefix := append(append([]byte(routeTenantPrefix), tenant...), 0)
	if err := db.scan(cfDefault, rtPrefix, func(k, _ []byte) error {
		wb.DeleteCF(def, bytes.Clone(k))
		wb.DeleteCF(def, RouteKey(string(k[len(rtPrefix):])))
		x.Routes++
		return nil
	}); err != nil {
		return x, err
	}
	var penBytes int64
	if err := db.scan(cfQuarantine, []byte{penSummary}, func(k, v []byte) error {
		s, ok, err := penSummaryAt(k, v)
		if err != nil || !ok || s.Tenant != tenant {
			return nil
		}
		wb.DeleteCF(pen, bytes.Clone(k))
		bk := bytes.Clone(k)
		bk[0] = penBody
		wb.DeleteCF(pen, bk)
		penBytes += int64(s.Size)
		x.PenEntries++
		return nil
	}); err != nil {
		return x, err
	}
	if x.PenEntries > 0 {
		wb.PutCF(def, []byte(metaPenBytes), binary.BigEndian.AppendUint64(nil, uint64(max(db.qs.pen.bytes-penBytes, 0))))
		wb.PutCF(def, []byte(metaPenCount), binary.BigEndian.AppendUint64(nil, uint64(max(db.qs.pen.count-int64(x.PenEntries), 0))))
	}
	if err := db.rdb.Write(db.wo, wb); err != nil {
		return x, &WriteError{Class: classify(err), Err: err}
	}
	for _, seq := range unmarked {
		delete(db.markers, seq)
	}
	if hasOrd {
		delete(db.ords, tenant)
		for fk := range db.inflight {
			if fk.Ord == ord {
				delete(db.inflight, fk)
			}
		}
	}
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	if err := db.loadCounters(); err != nil {
		return x, fmt.Errorf("erase of tenant %s written; counters not reloaded: %w", tenant, err)
	}
	db.wake()
	return x, nil
}

// ForEachKey calls fn for every key of every column family (tests prove an erase left no trace).
func (db *DB) ForEachKey(fn func(cf string, k, v []byte) error) error {
	return db.read(func() error {
		for cf := range db.cfs {
			if err := db.scan(cf, nil, func(k, v []byte) error { return fn(cfNames[cf], k, v) }); err != nil {
				return err
			}
		}
		return nil
	})
}
