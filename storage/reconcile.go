package storage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// HighestArchivedSeq is the last seq of the newest segment node wrote to bs whose day lies in [from, to]
// (unix ms), found by listing each day's directory: the catalogue of a store restored from a backup does not
// know the segments its lost predecessor wrote after that backup, but their seqs are taken. 0 when there is
// none.
func HighestArchivedSeq(ctx context.Context, bs blob.Store, node string, from, to int64) (uint64, error) {
	var high uint64
	for d := time.UnixMilli(from).UTC().Truncate(24 * time.Hour); !d.After(time.UnixMilli(to).UTC()); d = d.Add(24 * time.Hour) {
		prefix := dayDir(node, Day(d.UnixMilli())) + "/"
		err := bs.List(ctx, prefix, func(o blob.Object) error {
			if last, ok := segmentLastSeq(strings.TrimPrefix(o.Key, prefix)); ok && last > high {
				high = last
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("storage: cannot list %s: %w", prefix, err)
		}
	}
	return high, nil
}

// segmentLastSeq parses "seg-<first>-<last>.seg".
func segmentLastSeq(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, "seg-")
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".seg")
	if !ok {
		return 0, false
	}
	first, last, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	f, err1 := strconv.ParseUint(first, 10, 64)
	l, err2 := strconv.ParseUint(last, 10, 64)
	if err1 != nil || err2 != nil || l < f {
		return 0, false
	}
	return l, true
}
