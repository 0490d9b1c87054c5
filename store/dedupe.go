package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/linxGnu/grocksdb"
)

// The dedupe index (inventory E.2, seed Ingest row). One live key per (tenant, source, provider event key):
//
//	index CF  'u', tenant, 0x00, len(source):16, source, key → expires_at:64, original_id:128
//	          'e', expires_at:64, tenant, 0x00, len(source):16, source, key → empty
//	default   u:<tenant> → live dedupe keys of the tenant:64 (the node total is their sum)
//	          us:<source> → live dedupe keys of the source, over every tenant:64
//
// CommitHooks writes a 'u' key and its 'e' key in the synced batch of the hook that first used the key, and
// reads the 'u' keys of its group under commitMu and cmu, so the first occurrence of a key wins whichever
// partition read it first. Nothing else writes 'u' keys; SweepDedupe deletes them, never the writer. A key
// past its expiry but not yet swept still occupies the index: it counts against the quotas until the sweeper
// deletes it, and a commit that meets it takes its place (the count is unchanged; its old expiry key is left for
// the sweeper, which then finds a different expires_at and keeps the key).

// DedupeScope names one dedupe key: a provider event key of one source of one tenant.
type DedupeScope struct {
	Tenant, Source, Key string
}

// DedupeValueLen is the length of a 'u' key's value.
const DedupeValueLen = 8 + 16

// check refuses a scope the key layout cannot encode unambiguously. Tenant ids never hold a NUL byte and source
// ids are short (the edge validates both), so this only fails on a caller's bug.
func (s DedupeScope) check() error {
	if strings.IndexByte(s.Tenant, 0) >= 0 || len(s.Source) > math.MaxUint16 {
		return fmt.Errorf("dedupe scope of tenant %q (NUL byte?) and a %d-byte source: %w", s.Tenant, len(s.Source),
			ErrBadKey)
	}
	return nil
}

func appendDedupeScope(dst []byte, s DedupeScope) []byte {
	dst = append(dst, s.Tenant...)
	dst = append(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s.Source)))
	dst = append(dst, s.Source...)
	return append(dst, s.Key...)
}

func parseDedupeScope(b []byte) (DedupeScope, bool) {
	nul := bytes.IndexByte(b, 0)
	if nul < 0 || len(b) < nul+3 {
		return DedupeScope{}, false
	}
	n := int(binary.BigEndian.Uint16(b[nul+1:]))
	rest := b[nul+3:]
	if len(rest) < n {
		return DedupeScope{}, false
	}
	return DedupeScope{Tenant: string(b[:nul]), Source: string(rest[:n]), Key: string(rest[n:])}, true
}

// AppendDedupeKey appends the index CF key of s (a 'u' key). s must pass the checks of CommitHooks: a tenant
// without NUL bytes and a source of at most 65535 bytes.
func AppendDedupeKey(dst []byte, s DedupeScope) []byte {
	return appendDedupeScope(append(dst, IndexDedupe), s)
}

// ParseDedupeKey decodes a 'u' key.
func ParseDedupeKey(b []byte) (DedupeScope, error) {
	if len(b) == 0 || b[0] != IndexDedupe {
		return DedupeScope{}, fmt.Errorf("dedupe key %x: %w", b, ErrBadKey)
	}
	s, ok := parseDedupeScope(b[1:])
	if !ok {
		return DedupeScope{}, fmt.Errorf("dedupe key %x: %w", b, ErrBadKey)
	}
	return s, nil
}

// AppendDedupeExpiryKey appends the expiry key ('e') saying the 'u' key of s expires at expiresAt (unix ms).
// Expiry keys sort by time, so the sweeper reads only the ones due.
func AppendDedupeExpiryKey(dst []byte, expiresAt int64, s DedupeScope) []byte {
	dst = append(dst, IndexDedupeExpiry)
	dst = binary.BigEndian.AppendUint64(dst, uint64(expiresAt))
	return appendDedupeScope(dst, s)
}

// ParseDedupeExpiryKey decodes an 'e' key.
func ParseDedupeExpiryKey(b []byte) (expiresAt int64, s DedupeScope, err error) {
	if len(b) < 9 || b[0] != IndexDedupeExpiry || int64(binary.BigEndian.Uint64(b[1:])) < 0 {
		return 0, DedupeScope{}, fmt.Errorf("dedupe expiry key %x: %w", b, ErrBadKey)
	}
	s, ok := parseDedupeScope(b[9:])
	if !ok {
		return 0, DedupeScope{}, fmt.Errorf("dedupe expiry key %x: %w", b, ErrBadKey)
	}
	return int64(binary.BigEndian.Uint64(b[1:])), s, nil
}

// AppendDedupeValue appends the value of a 'u' key: when it expires and the id of the hook that first used it.
func AppendDedupeValue(dst []byte, expiresAt int64, id [16]byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(expiresAt))
	return append(dst, id[:]...)
}

// ParseDedupeValue decodes the value of a 'u' key.
func ParseDedupeValue(b []byte) (expiresAt int64, id [16]byte, err error) {
	if len(b) != DedupeValueLen || int64(binary.BigEndian.Uint64(b)) < 0 {
		return 0, id, fmt.Errorf("dedupe value %x: %w", b, ErrCorruptValue)
	}
	return int64(binary.BigEndian.Uint64(b)), [16]byte(b[8:]), nil
}

// appendDedupeSourceCountKey appends the default CF key holding the number of source's dedupe keys. "us:" never
// starts with "u:", so the two prefixes scan apart.
func appendDedupeSourceCountKey(dst []byte, source string) []byte {
	dst = append(dst, dedupeSourceCountPrefix...)
	return append(dst, source...)
}

// DedupeQuotaError is the ErrDedupeQuota of one scope: which bound a new key would pass.
type DedupeQuotaError struct {
	Scope string // DedupeScopeNode, DedupeScopeTenant or DedupeScopeSource
}

// The scopes of a DedupeQuotaError, named as the quota label of ankusa_quota_refused_total.
const (
	DedupeScopeNode   = "dedupe_node"   // dedupe.max_entries
	DedupeScopeTenant = "dedupe_tenant" // dedupe.max_entries_per_tenant
	DedupeScopeSource = "dedupe_source" // dedupe.max_entries_per_source
)

// Quota errors of each scope, allocated once: a refusal costs no allocation.
var (
	errDedupeQuotaNode   = &DedupeQuotaError{Scope: DedupeScopeNode}
	errDedupeQuotaTenant = &DedupeQuotaError{Scope: DedupeScopeTenant}
	errDedupeQuotaSource = &DedupeQuotaError{Scope: DedupeScopeSource}
)

func (e *DedupeQuotaError) Error() string { return ErrDedupeQuota.Error() + " (" + e.Scope + ")" }

// Is makes every DedupeQuotaError an ErrDedupeQuota.
func (e *DedupeQuotaError) Is(target error) bool { return target == ErrDedupeQuota }

// appendDedupeCountKey appends the default CF key holding the number of tenant's dedupe keys.
func appendDedupeCountKey(dst []byte, tenant string) []byte {
	dst = append(dst, dedupeCountPrefix...)
	return append(dst, tenant...)
}

// expiryOf is the expiry of a key first used at `at` (unix ms) with ttl, rounded up to the millisecond so a
// positive TTL never yields a key that is already expired, and capped instead of wrapping.
func expiryOf(at int64, ttl time.Duration) int64 {
	ms := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	if ms > math.MaxInt64-at {
		return math.MaxInt64
	}
	return at + ms
}

// getDedupe reads the 'u' key k (the caller holds closeMu). A value that cannot be decoded is an error
// wrapping ErrCorruptValue, with found set.
func (db *DB) getDedupe(k []byte) (expiresAt int64, id [16]byte, found bool, err error) {
	s, err := db.rdb.GetCF(db.ro, db.cfs[cfIndex], k)
	if err != nil {
		return 0, id, false, fmt.Errorf("cannot read dedupe key %q: %w", k, err)
	}
	defer s.Free()
	if !s.Exists() {
		return 0, id, false, nil
	}
	expiresAt, id, err = ParseDedupeValue(s.Data())
	return expiresAt, id, true, err
}

// dedupeLocked decides the dedupe outcome of r, committed at `at` (unix ms), inside CommitHooks (commitMu and
// cmu held). It returns true when r is to be committed, having then added its 'u' and 'e' keys to wb and its
// count to the edit set; false with r.Outcome set when r is a duplicate or refused. An error (a failed read)
// fails the whole commit.
func (db *DB) dedupeLocked(wb *grocksdb.WriteBatch, r *Record, at int64) (bool, error) {
	s := DedupeScope{Tenant: r.Tenant, Source: r.Source, Key: r.DedupeKey}
	if err := s.check(); err != nil {
		r.Outcome = Outcome{Status: OutcomeRefused, Err: err}
		return false, nil
	}
	if id, ok := db.seen[s]; ok {
		r.Outcome = Outcome{Status: OutcomeDuplicate, OriginalID: id}
		return false, nil
	}
	db.key = AppendDedupeKey(db.key[:0], s)
	exp, id, found, err := db.getDedupe(db.key)
	switch {
	case found && err != nil:
		// Damage to one key refuses the hooks that use it (503, the provider retries), not the whole group;
		// the sweeper deletes the key when its expiry comes due.
		r.Outcome = Outcome{Status: OutcomeRefused, Err: err}
		return false, nil
	case err != nil:
		return false, err
	case found && exp > at:
		r.Outcome = Outcome{Status: OutcomeDuplicate, OriginalID: id}
		return false, nil
	case !found:
		total, tenant := db.dedupeCountsLocked(r.Tenant)
		source := db.dedupeSourceCountLocked(r.Source)
		var quota error
		switch {
		case db.dedupeMax > 0 && total >= db.dedupeMax:
			quota = errDedupeQuotaNode
		case db.dedupeMaxTenant > 0 && tenant >= db.dedupeMaxTenant:
			quota = errDedupeQuotaTenant
		case db.dedupeMaxSource > 0 && source >= db.dedupeMaxSource:
			quota = errDedupeQuotaSource
		}
		if quota != nil {
			r.Outcome = Outcome{Status: OutcomeRefused, Err: quota}
			return false, nil
		}
		db.ed.dedupe[r.Tenant] = tenant + 1
		db.ed.dedupeSource[r.Source] = source + 1
		db.ed.dedupeDelta++
	}
	// A new key, or an expired one not yet swept taking the new hook's id.
	exp = expiryOf(at, r.DedupeTTL)
	index := db.cfs[cfIndex]
	db.val = AppendDedupeValue(db.val[:0], exp, r.ID)
	wb.PutCF(index, db.key, db.val)
	db.key = AppendDedupeExpiryKey(db.key[:0], exp, s)
	wb.PutCF(index, db.key, nil)
	db.seen[s] = r.ID
	return true, nil
}

// dedupeCountsLocked returns the node's and tenant's live dedupe keys as the batch being built leaves them
// (cmu held).
func (db *DB) dedupeCountsLocked(tenant string) (total, forTenant int64) {
	total = db.qs.dedupeTotal + db.ed.dedupeDelta
	if n, ok := db.ed.dedupe[tenant]; ok {
		return total, n
	}
	if n := db.qs.dedupe[tenant]; n != nil {
		return total, *n
	}
	return total, 0
}

// dedupeSourceCountLocked returns source's live dedupe keys as the batch being built leaves them (cmu held).
func (db *DB) dedupeSourceCountLocked(source string) int64 {
	if n, ok := db.ed.dedupeSource[source]; ok {
		return n
	}
	if n := db.qs.dedupeSource[source]; n != nil {
		return *n
	}
	return 0
}

// loadDedupeSourceCounts reads the per-source dedupe counts at open (after the tenants'). A store whose source
// counts do not add up to the node's total (written before they existed, or damaged) gets them rebuilt from one
// scan of the dedupe keys, written in one synced batch.
func (db *DB) loadDedupeSourceCounts() error {
	var sum int64
	err := db.scan(cfDefault, []byte(dedupeSourceCountPrefix), func(k, v []byte) error {
		source := string(k[len(dedupeSourceCountPrefix):])
		if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0 {
			return fmt.Errorf("dedupe key count of source %q = %x: want a non-negative 8-byte count", source, v)
		}
		n := int64(binary.BigEndian.Uint64(v))
		db.qs.dedupeSource[source] = &n
		sum += n
		return nil
	})
	if err != nil || sum == db.qs.dedupeTotal {
		return err
	}
	counts := map[string]int64{}
	err = db.scan(cfIndex, []byte{IndexDedupe}, func(k, _ []byte) error {
		s, err := ParseDedupeKey(k)
		if err != nil {
			return err
		}
		counts[s.Source]++
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot rebuild the dedupe counts of each source: %w", err)
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	meta := db.cfs[cfDefault]
	for source := range db.qs.dedupeSource {
		wb.DeleteCF(meta, appendDedupeSourceCountKey(nil, source))
	}
	clear(db.qs.dedupeSource)
	for source, n := range counts {
		wb.PutCF(meta, appendDedupeSourceCountKey(nil, source), binary.BigEndian.AppendUint64(nil, uint64(n)))
		db.qs.dedupeSource[source] = &n
	}
	if err := db.rdb.Write(db.wo, wb); err != nil {
		return fmt.Errorf("cannot write the rebuilt dedupe counts of each source: %w", err)
	}
	db.log.Info().Int("sources", len(counts)).Int64("counted", sum).Int64("dedupe_keys", db.qs.dedupeTotal).
		Msg("dedupe key counts of each source rebuilt")
	return nil
}

// LookupDedupe reports the id of the hook that holds the dedupe key (tenant, source, key), if that key is live
// at now (its expiry after now). It is the edge's fast path: a hit answers duplicate without queueing the
// record. A miss proves nothing (another partition may be committing the key); the writer decides again.
func (db *DB) LookupDedupe(tenant, source, key string, now time.Time) (id [16]byte, ok bool, err error) {
	s := DedupeScope{Tenant: tenant, Source: source, Key: key}
	if err := s.check(); err != nil {
		return id, false, err
	}
	var buf [128]byte
	k := AppendDedupeKey(buf[:0], s)
	err = db.read(func() error {
		exp, got, found, err := db.getDedupe(k)
		if err != nil {
			return err
		}
		if found && exp > now.UnixMilli() {
			id, ok = got, true
		}
		return nil
	})
	return id, ok, err
}

// SweepDedupe deletes the dedupe keys whose expiry key is at or before now, up to limit expiry keys, and
// returns how many dedupe keys it deleted. It reads the due expiry keys first, then, under cmu, re-reads each
// one's 'u' key and deletes it only if it still expires when the expiry key says: a key a commit refreshed
// in between survives. The expiry key is deleted either way. The write is not synced: a deletion lost in a
// crash brings back an expired key, which only keeps its window open until the next sweep.
func (db *DB) SweepDedupe(now time.Time, limit int) (deleted int, err error) {
	_, deleted, err = db.sweepDedupe(now, limit)
	return deleted, err
}

// sweepDedupe is SweepDedupe, also returning how many expiry keys it visited (the sweeper goes on at once
// while a sweep fills its limit).
func (db *DB) sweepDedupe(now time.Time, limit int) (visited, deleted int, err error) {
	ms := now.UnixMilli()
	if limit <= 0 || ms < 0 {
		return 0, 0, nil
	}
	var due [][]byte
	err = db.read(func() error {
		upper := binary.BigEndian.AppendUint64([]byte{IndexDedupeExpiry}, uint64(ms)+1)
		it, done := db.boundedIter(cfIndex, []byte{IndexDedupeExpiry}, upper)
		defer done()
		for it.Seek([]byte{IndexDedupeExpiry}); it.Valid() && len(due) < limit; it.Next() {
			due = append(due, bytes.Clone(it.Key().Data()))
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("cannot scan the dedupe expiry keys: %w", err)
		}
		return nil
	})
	if err != nil || len(due) == 0 {
		return 0, 0, err
	}
	if f := db.faults; f != nil && f.AfterDedupeScan != nil {
		f.AfterDedupeScan()
	}

	db.cmu.Lock()
	defer db.cmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return 0, 0, ErrClosed
	}
	db.ed.reset()
	wb := db.owb
	wb.Clear()
	index := db.cfs[cfIndex]
	for _, ek := range due {
		wb.DeleteCF(index, ek)
		exp, s, err := ParseDedupeExpiryKey(ek)
		if err == nil {
			err = s.check()
		}
		if err != nil {
			db.log.Warn().Err(err).Msg("malformed dedupe expiry key: deleted")
			continue
		}
		db.okey = AppendDedupeKey(db.okey[:0], s)
		cur, _, found, err := db.getDedupe(db.okey)
		switch {
		case !found && err != nil:
			return 0, 0, err
		case !found:
			continue // deleted already (a stale expiry key of a key refreshed, then swept)
		case err != nil:
			db.log.Warn().Err(err).Str("tenant", s.Tenant).Str("source", s.Source).
				Msg("undecodable dedupe key: deleted")
		case cur != exp:
			continue // refreshed after this expiry key was written: its own expiry key deletes it
		}
		wb.DeleteCF(index, db.okey)
		_, n := db.dedupeCountsLocked(s.Tenant)
		db.ed.dedupe[s.Tenant] = max(0, n-1)
		if n > 0 {
			db.ed.dedupeDelta--
		}
		db.ed.dedupeSource[s.Source] = max(0, db.dedupeSourceCountLocked(s.Source)-1)
		deleted++
	}
	db.putCountersLocked(wb)
	if err := db.rdb.Write(db.woAsync, wb); err != nil {
		return 0, 0, &WriteError{Class: classify(err), Err: err}
	}
	db.applyEditsLocked(nil)
	return len(due), deleted, nil
}

// DedupeSourceCount returns source's live dedupe keys over every tenant, from memory: O(1). Zero after Close.
func (db *DB) DedupeSourceCount(source string) int64 {
	if db.isClosed.Load() {
		return 0
	}
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	if n := db.qs.dedupeSource[source]; n != nil {
		return *n
	}
	return 0
}

// DedupeCounts returns the live dedupe keys on the node and of tenant (keys past their expiry count until the
// sweeper deletes them). It reads the in-memory image: O(1), no scan. Zero after Close.
func (db *DB) DedupeCounts(tenant string) (total, forTenant int64) {
	if db.isClosed.Load() {
		return 0, 0
	}
	db.stateMu.Lock()
	defer db.stateMu.Unlock()
	if n := db.qs.dedupe[tenant]; n != nil {
		return db.qs.dedupeTotal, *n
	}
	return db.qs.dedupeTotal, 0
}
