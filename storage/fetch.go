package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
)

// Fetch returns the archived hook with id, byte for byte as it was stored: one catalogue read, one range read
// of its frame, the frame's CRC checked. ErrNotFound when no catalogued segment holds it; a segment object that
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
	return h, nil
}

// ReplayStats is what a Replay walked.
type ReplayStats struct {
	Segments int // segments read
	Skipped  int // catalogued segments whose objects are gone or fail their checks
	Hooks    int // hooks handed to fn
}

// Replay calls fn, in seq order, for every archived hook received in [from, to] (unix ms; to 0 = no bound):
// what an archive replay re-enqueues. It reads each overlapping segment whole and checks it against the
// catalogue's sha256; a segment whose object is gone or damaged is skipped (counted) rather than failing the
// walk (seed: "a replay skips a segment whose objects are gone"). It stops at fn's first error or ctx's end.
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
		seg, err := readAll(ctx, bs, e.SegmentKey)
		if err == nil && int64(len(seg)) != e.Bytes {
			err = fmt.Errorf("%s is %d bytes, catalogued %d: %w", e.SegmentKey, len(seg), e.Bytes, ErrCorrupt)
		}
		if err != nil {
			st.Skipped++
			continue
		}
		if sumOf(seg) != e.SHA256 {
			st.Skipped++
			continue
		}
		var hooks []store.Hook
		var seqs []uint64
		idx, err := readAll(ctx, bs, e.IndexKey)
		var x Index
		if err == nil {
			x, err = DecodeIndex(idx)
		}
		if err == nil && len(x.Entries) != int(e.Count) {
			err = fmt.Errorf("index of %s has %d entries, catalogued %d: %w", e.SegmentKey, len(x.Entries), e.Count, ErrCorrupt)
		}
		if err == nil {
			i := 0
			err = DecodeSegment(seg, func(off int64, p []byte) error {
				if i >= len(x.Entries) || x.Entries[i].Offset != off {
					return fmt.Errorf("record at %d not in the index: %w", off, ErrCorrupt)
				}
				seq := x.Entries[i].Seq
				i++
				if at := x.Entries[i-1].ReceivedAt; at < from || (to > 0 && at > to) {
					return nil
				}
				h, err := store.DecodeHook(p)
				if err != nil {
					return err
				}
				hooks, seqs = append(hooks, h), append(seqs, seq)
				return nil
			})
		}
		if err != nil {
			st.Skipped++
			continue
		}
		st.Segments++
		for i := range hooks {
			if err := fn(seqs[i], &hooks[i]); err != nil {
				return st, err
			}
			st.Hooks++
		}
	}
	return st, nil
}

func readAll(ctx context.Context, bs blob.Store, key string) ([]byte, error) {
	r, err := bs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
