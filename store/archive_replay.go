package store

import (
	"encoding/binary"
	"fmt"
	"time"
)

// ArchiveCursor is an archive replay job's durable position (its ReplayJob.Cursor): the catalogue is read in
// first-seq order from the segment starting at Segment or later, and a hook whose seq is at most Seq was
// committed again already (or passed over by the filters). Seqs are node-local and never reused, so a hook the
// archive holds twice (a segment written again after a crash) is replayed once.
type ArchiveCursor struct {
	Segment uint64 // first seq of the next segment to read (the one being read, while it is unfinished)
	Seq     uint64 // hooks at or below this seq are done
}

// AppendArchiveCursor appends c's encoding (segment:64 seq:64, big-endian) to dst.
func AppendArchiveCursor(dst []byte, c ArchiveCursor) []byte {
	dst = binary.BigEndian.AppendUint64(dst, c.Segment)
	return binary.BigEndian.AppendUint64(dst, c.Seq)
}

// ParseArchiveCursor decodes an archive job's cursor; an empty one is the start of the catalogue.
func ParseArchiveCursor(b []byte) (ArchiveCursor, error) {
	switch len(b) {
	case 0:
		return ArchiveCursor{}, nil
	case 16:
		return ArchiveCursor{Segment: binary.BigEndian.Uint64(b), Seq: binary.BigEndian.Uint64(b[8:])}, nil
	}
	return ArchiveCursor{}, fmt.Errorf("archive replay cursor of %d bytes: %w", len(b), ErrCorruptValue)
}

// ArchivedCopy is one hook read back from a segment, with the seq it had when it was archived.
type ArchivedCopy struct {
	Seq  uint64
	Hook Hook
}

// ArchiveBatch is what one read of the archive for a replay returns: the hooks of the first readable catalogued
// segment at or after a cursor (those received in the job's window with a seq past the cursor's), how many
// segments before it were skipped, and the cursor once every hook of the batch is done.
type ArchiveBatch struct {
	Segment SegmentEntry // the segment read (zero when Hooks is empty and Done)
	Hooks   []ArchivedCopy
	Skipped int           // catalogued segments passed over: objects gone or failing their checks
	Next    ArchiveCursor // where the job goes on after Hooks
	Done    bool          // no catalogued segment at or after Next meets the window
}

// NextSegment returns the first catalogued segment, in first-seq order, starting at first or later whose
// received_at range meets [from, to) (unix ms).
func (db *DB) NextSegment(first uint64, from, to int64) (SegmentEntry, bool, error) {
	var out SegmentEntry
	var found bool
	err := db.read(func() error {
		lower := appendSegmentKey(nil, first)
		it, done := db.boundedIter(cfArchive, lower, []byte{archiveSegment + 1})
		defer done()
		for it.Seek(lower); it.Valid(); it.Next() {
			e, err := DecodeSegmentEntry(it.Value().Data())
			if err != nil {
				return fmt.Errorf("segment row %x: %w", it.Key().Data(), err)
			}
			if e.MaxReceivedAt >= from && e.MinReceivedAt < to {
				out, found = e, true
				return nil
			}
		}
		return it.Err()
	})
	return out, found, err
}

// RedriveArchivedStep commits one step of archive replay job j: recs (hooks read back from the archive, each
// with its source's current sinks and ReplayID set, no dedupe and no archive obligation) are committed as new
// hooks with fresh seqs and pending delivery rows, and the job's progress (Cursor = cursor, Moved + the hooks
// committed, Skipped + skipped, State done when done) in the same synced batch, so a restart resumes after the
// last step and never commits a hook of a finished step again. The job's stored record is authoritative: a job
// paused, cancelled or done since j was read commits nothing, and j is refreshed from what was committed.
func (db *DB) RedriveArchivedStep(j *ReplayJob, recs []*Record, cursor ArchiveCursor, skipped int, done bool) (int, error) {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	db.cmu.Lock()
	defer db.cmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return 0, ErrClosed
	}
	job, err := db.storedJobLocked(j.ID)
	if err != nil {
		return 0, err
	}
	if job.State != replayRunning || job.Kind != ReplayKindArchive {
		*j = job
		return 0, nil
	}
	for _, r := range recs {
		r.DedupeKey, r.DedupeTTL, r.Archive = "", 0, false
	}
	first := db.nextSeq.Load()
	at := max(time.Now().UnixMilli(), db.lastCommit)
	db.lastCommit = at
	wb := db.wb
	wb.Clear()
	db.ed.reset()
	db.newTenants = db.newTenants[:0]
	ordBefore := db.nextOrd
	next, rows, err := db.addRecordsLocked(wb, recs, first, at, &freshTake{})
	if err != nil {
		db.ed.reset()
		return 0, err
	}
	if next != first {
		db.putSeqMetaLocked(wb, ordBefore, next)
	}
	job.Cursor = AppendArchiveCursor(nil, cursor)
	job.Moved += int64(next - first)
	job.Skipped += int64(skipped)
	if done {
		job.State = replayDone
	}
	db.okey = appendJobKey(db.okey[:0], job.ID)
	wb.PutCF(db.cfs[cfDefault], db.okey, AppendReplayJob(nil, &job))
	if err := db.rdb.Write(db.wo, wb); err != nil {
		db.ed.reset()
		return 0, &WriteError{Class: classify(err), Err: err}
	}
	for _, t := range db.newTenants {
		db.ords[t.tenant] = t.ord
	}
	db.applyEditsLocked(db.newTenants)
	*j = job
	if rows > 0 {
		db.wake()
	}
	return int(next - first), nil
}
