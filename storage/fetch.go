package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
)

// Fetch returns the archived hook with id, byte for byte as it was stored: one catalogue read, one range read
// of its frame, the frame's CRC checked. ErrNotFound when no catalogued segment holds it, ErrGone when its tenant
// was erased; a segment object that
// is gone (or a frame that fails its checks) is an error that is not ErrNotFound.
func Fetch(ctx context.Context, db *store.DB, bs blob.Store, id [16]byte) (store.Hook, error) {
	return FetchVisible(ctx, db, bs, id, time.Time{})
}

// FetchVisible is Fetch hiding segments whose newest hook is older than oldest (storage.catalogue_retention_days;
// the zero time hides nothing).
func FetchVisible(ctx context.Context, db *store.DB, bs blob.Store, id [16]byte, oldest time.Time) (store.Hook, error) {
	e, loc, err := db.ArchivedSegment(id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Hook{}, fmt.Errorf("hook %x: %w", id, ErrNotFound)
	}
	if err != nil {
		return store.Hook{}, fmt.Errorf("cannot look hook %x up in the catalogue: %w", id, err)
	}
	if !oldest.IsZero() && e.MaxReceivedAt < oldest.UnixMilli() {
		return store.Hook{}, fmt.Errorf("hook %x is in a segment past storage.catalogue_retention_days: %w", id, ErrNotFound)
	}
	frame, err := bs.GetRange(ctx, e.SegmentKey, loc.Offset, int64(loc.Length))
	if err != nil {
		return store.Hook{}, fmt.Errorf("cannot read hook %x from %s: %w", id, e.SegmentKey, err)
	}
	p, err := DecodeFrame(frame)
	if err != nil {
		return store.Hook{}, fmt.Errorf("hook %x in %s at %d: %w", id, e.SegmentKey, loc.Offset, err)
	}
	h, err := store.DecodeHook(p)
	if err != nil {
		return store.Hook{}, fmt.Errorf("hook %x in %s at %d: %w", id, e.SegmentKey, loc.Offset, err)
	}
	if h.ID != id {
		return store.Hook{}, fmt.Errorf("frame at %d of %s holds hook %x, not %x: %w", loc.Offset, e.SegmentKey, h.ID, id, ErrCorrupt)
	}
	erased, err := db.TenantErased(h.Tenant)
	if err != nil {
		return store.Hook{}, err
	}
	if erased {
		return store.Hook{}, fmt.Errorf("hook %x: %w", id, ErrGone)
	}
	return h, nil
}

// ReplayStats is what a Replay walked.
type ReplayStats struct {
	Segments int // segments read
	Skipped  int // catalogued segments whose objects are gone or fail their checks
	Hooks    int // hooks handed to fn
}

// Replay calls fn, in seq order, for every archived hook received in [from, to] (unix ms; to 0 = no bound). It
// reads each overlapping segment whole and checks it against the catalogue's sha256; a segment whose object is
// gone or damaged is skipped (counted) rather than failing the walk (seed: "a replay skips a segment whose
// objects are gone"). It stops at fn's first error or ctx's end.
func Replay(ctx context.Context, db *store.DB, bs blob.Store, from, to int64, fn func(seq uint64, h *store.Hook) error) (ReplayStats, error) {
	var st ReplayStats
	var segs []store.SegmentEntry
	if err := db.Segments(from, to, func(e store.SegmentEntry) error { segs = append(segs, e); return nil }); err != nil {
		return st, fmt.Errorf("cannot scan the catalogue: %w", err)
	}
	for _, e := range segs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		hooks, err := readSegment(ctx, bs, &e, func(at int64) bool { return at >= from && (to <= 0 || at <= to) })
		if err != nil {
			st.Skipped++
			continue
		}
		st.Segments++
		for i := range hooks {
			if err := fn(hooks[i].Seq, &hooks[i].Hook); err != nil {
				return st, err
			}
			st.Hooks++
		}
	}
	return st, nil
}

// maxSkipsPerRead bounds the segments one ReplayNext passes over before it returns (each costs a failed read).
const maxSkipsPerRead = 64

// ReplayNext is one read of an archive replay job (inventory F.5, archive kind): the hooks received in
// [from, to) (unix ms) with a seq past pos.Seq of the first catalogued segment at or after pos.Segment that
// can be read, in seq order. A segment whose objects are gone or fail their checks is passed over, counted in
// Skipped and logged (seed: "a replay skips a segment whose objects are gone"); at most 64 of them per call,
// so a run of missing segments returns an empty batch that moves the cursor past them. The segment is read
// whole and checked against the catalogue's size and sha256 and its index.
func ReplayNext(ctx context.Context, db *store.DB, bs blob.Store, from, to int64, pos store.ArchiveCursor,
	log zerolog.Logger) (store.ArchiveBatch, error) {
	var b store.ArchiveBatch
	for b.Skipped < maxSkipsPerRead {
		e, ok, err := db.NextSegment(pos.Segment, from, to)
		if err != nil {
			return store.ArchiveBatch{}, fmt.Errorf("cannot read the catalogue: %w", err)
		}
		if !ok {
			b.Next, b.Done = pos, true
			return b, nil
		}
		hooks, err := readSegment(ctx, bs, &e, func(at int64) bool { return at >= from && at < to })
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return store.ArchiveBatch{}, cerr
			}
			b.Skipped++
			log.Warn().Err(err).Str("segment", e.SegmentKey).Msg("archive replay: segment skipped, its hooks are not replayed")
			pos.Segment = e.FirstSeq + 1
			continue
		}
		b.Segment = e
		for _, h := range hooks {
			if h.Seq > pos.Seq {
				b.Hooks = append(b.Hooks, h)
			}
		}
		b.Next = store.ArchiveCursor{Segment: e.FirstSeq + 1, Seq: max(pos.Seq, e.LastSeq)}
		return b, nil
	}
	b.Next = pos
	return b, nil
}

// readSegment reads segment e whole, checks it (size, sha256, index, every frame) and returns its hooks whose
// received_at keep accepts, in seq order.
func readSegment(ctx context.Context, bs blob.Store, e *store.SegmentEntry, keep func(at int64) bool) ([]store.ArchivedCopy, error) {
	seg, err := readAll(ctx, bs, e.SegmentKey)
	if err != nil {
		return nil, err
	}
	if int64(len(seg)) != e.Bytes {
		return nil, fmt.Errorf("%s is %d bytes, catalogued %d: %w", e.SegmentKey, len(seg), e.Bytes, ErrCorrupt)
	}
	if sumOf(seg) != e.SHA256 {
		return nil, fmt.Errorf("%s does not match its catalogued sha256: %w", e.SegmentKey, ErrCorrupt)
	}
	idx, err := readAll(ctx, bs, e.IndexKey)
	if err != nil {
		return nil, err
	}
	x, err := DecodeIndex(idx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.IndexKey, err)
	}
	if len(x.Entries) != int(e.Count) {
		return nil, fmt.Errorf("index of %s has %d entries, catalogued %d: %w", e.SegmentKey, len(x.Entries), e.Count, ErrCorrupt)
	}
	var hooks []store.ArchivedCopy
	i := 0
	err = DecodeSegment(seg, func(off int64, p []byte) error {
		if i >= len(x.Entries) || x.Entries[i].Offset != off {
			return fmt.Errorf("record at %d of %s not in the index: %w", off, e.SegmentKey, ErrCorrupt)
		}
		ent := x.Entries[i]
		i++
		if !keep(ent.ReceivedAt) {
			return nil
		}
		h, err := store.DecodeHook(p)
		if err != nil {
			return err
		}
		hooks = append(hooks, store.ArchivedCopy{Seq: ent.Seq, Hook: h})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return hooks, nil
}

func readAll(ctx context.Context, bs blob.Store, key string) ([]byte, error) {
	r, err := bs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
