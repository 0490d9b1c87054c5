package storage

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
)

// segmentRange parses "seg-<first>-<last>.seg".
func segmentRange(name string) (first, last uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, "seg-")
	if !ok {
		return 0, 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".seg")
	if !ok {
		return 0, 0, false
	}
	fs, ls, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, 0, false
	}
	f, err1 := strconv.ParseUint(fs, 10, 64)
	l, err2 := strconv.ParseUint(ls, 10, 64)
	if err1 != nil || err2 != nil || l < f {
		return 0, 0, false
	}
	return f, l, true
}

// RecatalogueStats is what a Recatalogue found and did.
type RecatalogueStats struct {
	Listed     int    // segments of the node in the window's days
	Catalogued int    // segments the catalogue did not hold, catalogued from their index
	Hooks      int    // hooks those segments made fetchable
	Unreadable int    // uncatalogued segments left out: index missing or failing its checks, or a size mismatch
	HighestSeq uint64 // the last seq of the newest segment listed, catalogued or not (0: none)
}

// Recatalogue catalogues again the segments node wrote to bs on the days of [from, to] (unix ms) that db's
// catalogue does not hold (inventory E.5: "uncatalogued segments catalogued from their index"). A store
// restored from a backup does not know the segments its lost predecessor wrote after that backup; their hooks
// exist only there now, and without a catalogue row Fetch cannot find them.
//
// Each such segment is catalogued from its index object alone (ids, seqs, offsets, received_at, the segment's
// size and sha256), after checking the listed segment object has the size the index names, through
// store.CatalogueSegment: so the restored store's archive obligations of hooks the segment holds are cleared as
// a compaction would clear them, and the compactor does not write a second segment starting at the same seq.
// Of several segments starting at one seq (a compaction retried with more obligations after a crash) the
// longest is taken: it holds the others' hooks. A segment whose index cannot be read is left out and counted;
// its seqs still count in HighestSeq, which the restore moves m:next_seq past.
func Recatalogue(ctx context.Context, db *store.DB, bs blob.Store, node string, from, to int64,
	log zerolog.Logger) (RecatalogueStats, error) {
	var st RecatalogueStats
	known := map[uint64]bool{}
	if err := db.Segments(0, 0, func(e store.SegmentEntry) error { known[e.FirstSeq] = true; return nil }); err != nil {
		return st, fmt.Errorf("storage: cannot read the catalogue: %w", err)
	}
	type listed struct {
		key         string
		first, last uint64
		size        int64
	}
	longest := map[uint64]listed{}
	for d := time.UnixMilli(from).UTC().Truncate(24 * time.Hour); !d.After(time.UnixMilli(to).UTC()); d = d.Add(24 * time.Hour) {
		prefix := dayDir(node, Day(d.UnixMilli())) + "/"
		err := bs.List(ctx, prefix, func(o blob.Object) error {
			first, last, ok := segmentRange(strings.TrimPrefix(o.Key, prefix))
			if !ok {
				return nil
			}
			st.Listed++
			st.HighestSeq = max(st.HighestSeq, last)
			if l, seen := longest[first]; !seen || last > l.last {
				longest[first] = listed{key: o.Key, first: first, last: last, size: o.Size}
			}
			return nil
		})
		if err != nil {
			return st, fmt.Errorf("storage: cannot list %s: %w", prefix, err)
		}
	}
	todo := make([]listed, 0, len(longest))
	for first, l := range longest {
		if !known[first] {
			todo = append(todo, l)
		}
	}
	sort.Slice(todo, func(a, b int) bool { return todo[a].first < todo[b].first })
	for _, l := range todo {
		idxKey := strings.TrimSuffix(l.key, ".seg") + ".idx"
		e, hooks, err := entryFromIndex(ctx, bs, l.key, idxKey, l.first, l.last, l.size)
		if err != nil {
			st.Unreadable++
			log.Error().Err(err).Str("segment", l.key).
				Msg("restore: segment left out of the catalogue, its hooks cannot be fetched")
			continue
		}
		if _, err := db.CatalogueSegment(&e, hooks, nil, nil); err != nil {
			return st, fmt.Errorf("storage: cannot catalogue %s: %w", l.key, err)
		}
		st.Catalogued++
		st.Hooks += len(hooks)
	}
	return st, nil
}

// entryFromIndex reads the index of segment seg and builds its catalogue row and id keys from it.
func entryFromIndex(ctx context.Context, bs blob.Store, seg, idxKey string, first, last uint64, size int64) (
	store.SegmentEntry, []store.ArchivedHook, error) {
	raw, err := readAll(ctx, bs, idxKey)
	if err != nil {
		return store.SegmentEntry{}, nil, fmt.Errorf("cannot read %s: %w", idxKey, err)
	}
	x, err := DecodeIndex(raw)
	if err != nil {
		return store.SegmentEntry{}, nil, fmt.Errorf("%s: %w", idxKey, err)
	}
	n := len(x.Entries)
	switch {
	case n == 0:
		return store.SegmentEntry{}, nil, fmt.Errorf("%s lists no hook: %w", idxKey, ErrCorrupt)
	case x.Entries[0].Seq != first || x.Entries[n-1].Seq != last:
		return store.SegmentEntry{}, nil, fmt.Errorf("%s holds seqs %d..%d, its name says %d..%d: %w", idxKey,
			x.Entries[0].Seq, x.Entries[n-1].Seq, first, last, ErrCorrupt)
	case x.SegmentSize != size:
		return store.SegmentEntry{}, nil, fmt.Errorf("%s is %d bytes, its index says %d: %w", seg, size, x.SegmentSize, ErrCorrupt)
	}
	e := store.SegmentEntry{FirstSeq: first, LastSeq: last, SegmentKey: seg, IndexKey: idxKey, Count: uint32(n),
		Bytes: x.SegmentSize, MinReceivedAt: x.Entries[0].ReceivedAt, MaxReceivedAt: x.Entries[0].ReceivedAt,
		SHA256: x.SegmentSHA256, CreatedAt: time.Now().UnixMilli()}
	hooks := make([]store.ArchivedHook, n)
	for i, en := range x.Entries {
		e.MinReceivedAt = min(e.MinReceivedAt, en.ReceivedAt)
		e.MaxReceivedAt = max(e.MaxReceivedAt, en.ReceivedAt)
		hooks[i] = store.ArchivedHook{Seq: en.Seq, ID: en.ID, Offset: en.Offset, Length: en.Length}
	}
	return e, hooks, nil
}
