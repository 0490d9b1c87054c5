package store

import "errors"

// ArchiveLocation is where an archived hook's frame is.
type ArchiveLocation struct {
	SegmentKey string
	Offset     int64
	Length     uint32
}

// ArchiveLocationOf reports where the archived hook with id is (ok false when no catalogued segment holds it).
func (db *DB) ArchiveLocationOf(id [16]byte) (ArchiveLocation, bool, error) {
	e, loc, err := db.ArchivedSegment(id)
	if err != nil {
		if isNotFound(err) {
			return ArchiveLocation{}, false, nil
		}
		return ArchiveLocation{}, false, err
	}
	return ArchiveLocation{SegmentKey: e.SegmentKey, Offset: loc.Offset, Length: loc.Length}, true, nil
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
