package store

import (
	"encoding/binary"
	"fmt"
)

// LaneKey names an ordered lane: one sink of one source, for one tenant.
type LaneKey struct {
	Ord    uint32
	Sink   uint16
	Source string
}

// LaneBlock is an ordered lane waiting for its head (Seq) to be retried at Until (unix ms): later rows of the
// lane are held back until then. It lives in the store so a restarted dispatch keeps the lane's order
// (inventory F.6, "lane state lives in the store").
type LaneBlock struct {
	Seq   uint64
	Until int64
}

const laneValueLen = 16

func appendLaneKey(dst []byte, k LaneKey) []byte {
	dst = append(dst, lanePrefix...)
	dst = binary.BigEndian.AppendUint32(dst, k.Ord)
	dst = binary.BigEndian.AppendUint16(dst, k.Sink)
	return append(dst, k.Source...)
}

func parseLaneKey(b []byte) (LaneKey, error) {
	if len(b) < len(lanePrefix)+6 || string(b[:len(lanePrefix)]) != lanePrefix {
		return LaneKey{}, fmt.Errorf("lane key %q: %w", b, ErrBadKey)
	}
	b = b[len(lanePrefix):]
	return LaneKey{Ord: binary.BigEndian.Uint32(b), Sink: binary.BigEndian.Uint16(b[4:]), Source: string(b[6:])}, nil
}

// LaneBlocks returns every recorded lane block (dispatch reads them when it starts).
func (db *DB) LaneBlocks() (map[LaneKey]LaneBlock, error) {
	out := make(map[LaneKey]LaneBlock)
	err := db.read(func() error {
		return db.scan(cfDefault, []byte(lanePrefix), func(k, v []byte) error {
			lk, err := parseLaneKey(k)
			if err != nil {
				return err
			}
			if len(v) != laneValueLen {
				return fmt.Errorf("lane block %+v of %d bytes: %w", lk, len(v), ErrCorruptValue)
			}
			out[lk] = LaneBlock{Seq: binary.BigEndian.Uint64(v), Until: int64(binary.BigEndian.Uint64(v[8:]))}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetLaneBlock records lane k's block. The write is not synced, like the outcome it follows: the next synced
// write (any commit) makes both durable; a crash before it loses the WAL tail in order, so either both are lost
// (the head is claimed again first) or only the block, letting the lane's later rows overtake its head once.
func (db *DB) SetLaneBlock(k LaneKey, b LaneBlock) error {
	return db.read(func() error {
		v := binary.BigEndian.AppendUint64(make([]byte, 0, laneValueLen), b.Seq)
		v = binary.BigEndian.AppendUint64(v, uint64(b.Until))
		if err := db.rdb.PutCF(db.woAsync, db.cfs[cfDefault], appendLaneKey(nil, k), v); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
		return nil
	})
}

// ClearLaneBlock removes lane k's block (non-synced).
func (db *DB) ClearLaneBlock(k LaneKey) error {
	return db.read(func() error {
		if err := db.rdb.DeleteCF(db.woAsync, db.cfs[cfDefault], appendLaneKey(nil, k)); err != nil {
			return &WriteError{Class: classify(err), Err: err}
		}
		return nil
	})
}
