package claimcheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/storage/blob"
)

// Claim is one checked-in body.
type Claim struct {
	ID     ClaimID
	Ref    string // urn:ankusa:claim:v1:<tenant>:<claim_id>
	Size   int64
	SHA256 string // lowercase hex, as Message v1 carries it
}

// Options of a Checker.
type Options struct {
	// PackMaxBytes is the target pack size (claim_check.pack_max_bytes): bodies are packed together up to it; a
	// bigger body gets a pack of its own.
	PackMaxBytes int64
	// CheckedIn, when set, is called once per CheckIn or CheckInHook with its error (nil: every pack durable):
	// the embedding process counts check-ins with it.
	CheckedIn func(err error)
	// Now and Entropy replace the clock and crypto/rand in tests.
	Now     func() time.Time
	Entropy io.Reader
}

// Checker checks bodies into packs. It is safe for concurrent use.
type Checker struct {
	store     blob.Store
	maxBytes  int64
	now       func() time.Time
	entropy   io.Reader
	checkedIn func(error)
}

// NewChecker writes packs to store (the claim blob store: never prefixed).
func NewChecker(store blob.Store, o Options) *Checker {
	c := &Checker{store: store, maxBytes: o.PackMaxBytes, now: o.Now, entropy: o.Entropy, checkedIn: o.CheckedIn}
	if c.checkedIn == nil {
		c.checkedIn = func(error) {}
	}
	if c.maxBytes <= 0 {
		c.maxBytes = 16 << 20
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.entropy == nil {
		c.entropy = rand.Reader
	}
	return c
}

// CheckIn packs the bodies of one tenant, split at PackMaxBytes and MaxClaimsPerPack, writes every pack and
// returns one claim per body, in order, once all packs are durable (invariant 1). On error no claim is
// returned; packs already written stay, unreferenced, until the retention sweep.
func (c *Checker) CheckIn(ctx context.Context, tenant string, bodies [][]byte) (claims []Claim, err error) {
	defer func() { c.checkedIn(err) }()
	if !message.ValidTenant(tenant) {
		return nil, fmt.Errorf("claimcheck: cannot check in for tenant %q: %w", tenant, ErrInvalidClaim)
	}
	claims = make([]Claim, 0, len(bodies))
	for start := 0; start < len(bodies); {
		end, size := start, int64(0)
		for end < len(bodies) && end-start < MaxClaimsPerPack {
			n := int64(len(bodies[end]))
			if end > start && size+n > c.maxBytes {
				break
			}
			size += n
			end++
		}
		var e [8]byte
		if _, err := io.ReadFull(c.entropy, e[:]); err != nil {
			return nil, fmt.Errorf("claimcheck: cannot mint a pack id: %w", err)
		}
		got, err := c.writePack(ctx, tenant, newPackID(c.now(), e), bodies[start:end])
		if err != nil {
			return nil, err
		}
		claims = append(claims, got...)
		start = end
	}
	return claims, nil
}

// CheckInHook checks in one hook's body outside dispatch as a one-claim pack whose id follows from the hook:
// its receive time and a hash of its id. A retry writes the same pack under the same key and returns the
// same claim (inventory D.5: idempotent retries); when that pack is already in the store with this body, nothing
// is written.
func (c *Checker) CheckInHook(ctx context.Context, tenant string, hookID [16]byte, receivedAt time.Time, body []byte) (_ Claim, err error) {
	defer func() { c.checkedIn(err) }()
	if !message.ValidTenant(tenant) {
		return Claim{}, fmt.Errorf("claimcheck: cannot check in for tenant %q: %w", tenant, ErrInvalidClaim)
	}
	h := sha256.Sum256(hookID[:])
	var e [8]byte
	copy(e[:], h[:8])
	id := newPackID(receivedAt, e)
	// A retry, or another sink of the same hook, finds the pack in place: two ranged reads instead of a write.
	sum := sha256.Sum256(body)
	if info, err := NewReader(c.store).Stat(ctx, tenant, id.String()); err == nil && info.Size == int64(len(body)) && info.SHA256 == sum {
		return Claim{ID: id, Ref: Ref(tenant, id), Size: info.Size, SHA256: hex.EncodeToString(sum[:])}, nil
	}
	got, err := c.writePack(ctx, tenant, id, [][]byte{body})
	if err != nil {
		return Claim{}, err
	}
	return got[0], nil
}

func (c *Checker) writePack(ctx context.Context, tenant string, id ClaimID, bodies [][]byte) ([]Claim, error) {
	ss := sums(bodies)
	pack, err := encodePack(tenant, id, bodies, ss)
	if err != nil {
		return nil, err
	}
	key := PackKey(tenant, id)
	if err := c.store.Put(ctx, key, bytes.NewReader(pack), int64(len(pack))); err != nil {
		return nil, fmt.Errorf("claimcheck: cannot write pack: %w", err)
	}
	claims := make([]Claim, len(bodies))
	for i, b := range bodies {
		cid := id.WithPosition(i)
		claims[i] = Claim{ID: cid, Ref: Ref(tenant, cid), Size: int64(len(b)), SHA256: hex.EncodeToString(ss[i][:])}
	}
	return claims, nil
}
