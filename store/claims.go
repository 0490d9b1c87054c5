package store

import (
	"encoding/binary"
	"fmt"
)

// Claim markers (inventory E.2: index CF <<'k', seq:64>>). Dispatch checks a body too large for a queue sink's
// message into the claim check once per hook and records the claim ref here, so every sink of the hook, every
// retry and every attempt after a restart carry the same ref instead of checking the body in again. A marker
// lives exactly as long as its hook: the batch that deletes the hook (its last delivery row completed, or its
// archive obligation cleared after that) deletes the marker too.
//
// Marker writes are not synced, like dispatch outcomes: a marker lost in a crash costs one more check-in, and
// the check-in of a hook is idempotent (its pack id follows from the hook), so it yields the same ref again.

// MaxClaimRefLen bounds a stored claim ref; a ref is urn:ankusa:claim:v1:<tenant ≤ 64>:<ULID 26>, far shorter.
const MaxClaimRefLen = 256

// AppendClaimKey appends the index CF key of hook seq's claim marker.
func AppendClaimKey(dst []byte, seq uint64) []byte {
	dst = append(dst, IndexClaim)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// ParseClaimKey decodes a claim marker key.
func ParseClaimKey(b []byte) (uint64, error) {
	if len(b) != ClaimKeyLen || b[0] != IndexClaim {
		return 0, fmt.Errorf("claim key %x: %w", b, ErrBadKey)
	}
	return binary.BigEndian.Uint64(b[1:]), nil
}

// ClaimRef returns the claim ref recorded for hook seq; ok is false when there is none.
func (db *DB) ClaimRef(seq uint64) (ref string, ok bool, err error) {
	err = db.read(func() error {
		v, err := db.getCF(cfIndex, AppendClaimKey(nil, seq))
		if err != nil {
			return err
		}
		ref, ok = string(v), v != nil
		return nil
	})
	return ref, ok, err
}

// PutClaimRef records ref as the claim of hook seq, replacing any earlier one. It writes nothing and returns
// ErrNotFound when the hook is gone: a marker is never left behind a reclaimed hook. It holds cmu, as every
// batch that deletes a hook does, so the hook cannot be reclaimed between the check and the write.
func (db *DB) PutClaimRef(seq uint64, ref string) error {
	if ref == "" || len(ref) > MaxClaimRefLen {
		return fmt.Errorf("store: claim ref of %d bytes for hook %d (1 to %d)", len(ref), seq, MaxClaimRefLen)
	}
	db.cmu.Lock()
	defer db.cmu.Unlock()
	return db.read(func() error {
		held, err := db.existsCF(cfHooks, AppendHookKey(nil, seq))
		if err != nil {
			return err
		}
		if !held {
			return fmt.Errorf("hook %d: %w", seq, ErrNotFound)
		}
		if err := db.rdb.PutCF(db.woAsync, db.cfs[cfIndex], AppendClaimKey(nil, seq), []byte(ref)); err != nil {
			// Whether the put landed is unknown: the seq is kept, so the hook's deletion deletes the marker.
			db.markers[seq] = struct{}{}
			return &WriteError{Class: classify(err), Err: fmt.Errorf("cannot record the claim of hook %d: %w", seq, err)}
		}
		db.markers[seq] = struct{}{}
		return nil
	})
}

// loadMarkers fills db.markers with the seqs of the claim markers in the store (Open). Markers exist only for
// hooks whose body went through the claim check, so the scan is short. A key that is no marker's is skipped:
// no hook's deletion would delete it anyway.
func (db *DB) loadMarkers() error {
	db.markers = make(map[uint64]struct{})
	return db.scan(cfIndex, []byte{IndexClaim}, func(k, _ []byte) error {
		if seq, err := ParseClaimKey(k); err == nil {
			db.markers[seq] = struct{}{}
		}
		return nil
	})
}
