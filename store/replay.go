package store

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
)

// ReplayJob is a durable replay job (default CF, j:<id>). Its progress (Cursor, Moved, and State done) is
// committed with the rows each step moves.
type ReplayJob struct {
	ID     [16]byte
	Kind   string // ReplayKindDLQ, ReplayKindArchive or ReplayKindLifecycle
	Source string // filter ("" = all)
	Tenant string // filter ("" = all; archive and lifecycle jobs)
	// Since and Until filter a dlq job's rows on DeadAt, inclusive (0 = unbounded); an archive job's window is
	// the hooks received in [Since, Until) (both required); a lifecycle job's the audit rows committed in
	// [Since, Until) (Until set to the creation time when 0).
	Since     int64 // unix ms
	Until     int64
	Rate      float64 // rows per second
	MaxLagMS  int64
	CreatedAt int64  // only rows dead at or before this move
	State     string // running|paused|cancelled|done
	Moved     int64
	Skipped   int64  // archive jobs: catalogued segments skipped because their objects are gone or damaged
	Cursor    []byte // dlq: last dead key visited; archive: an ArchiveCursor; lifecycle: the last audit seq (8 bytes)
}

// Replay job kinds (inventory F.5).
const (
	ReplayKindDLQ     = "dlq"
	ReplayKindArchive = "archive"
	// ReplayKindLifecycle re-publishes the lifecycle events of a window of the audit trail, with the ids of
	// their first delivery; the lifecycle publisher runs it.
	ReplayKindLifecycle = "lifecycle"
)

// Replay job states the store acts on (dispatch owns the others' meaning).
const (
	replayRunning   = "running"
	replayPaused    = "paused"
	replayCancelled = "cancelled"
	replayDone      = "done"
)

// replayVisitsPerRow bounds the dead keys one step visits per row it may move (at least minReplayVisits), so a
// filter that matches little cannot turn one step into a scan of the whole DLQ.
const (
	replayVisitsPerRow = 64
	minReplayVisits    = 4096
)

const (
	jobVersionV1 = 1
	jobVersion   = 2
)

// Encoding (version 2): version:8 id:128 kind source since:64 until:64 rate:64(float bits) max_lag_ms:64
// created_at:64 state moved:64 cursor tenant skipped:64, integers big-endian, strings and the cursor uvarint
// length + bytes. Version 1 ends after the cursor (no tenant filter, nothing skipped).

// AppendReplayJob appends the encoding of j to dst.
func AppendReplayJob(dst []byte, j *ReplayJob) []byte {
	dst = append(dst, jobVersion)
	dst = append(dst, j.ID[:]...)
	dst = appendStr(dst, j.Kind)
	dst = appendStr(dst, j.Source)
	dst = binary.BigEndian.AppendUint64(dst, uint64(j.Since))
	dst = binary.BigEndian.AppendUint64(dst, uint64(j.Until))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(j.Rate))
	dst = binary.BigEndian.AppendUint64(dst, uint64(j.MaxLagMS))
	dst = binary.BigEndian.AppendUint64(dst, uint64(j.CreatedAt))
	dst = appendStr(dst, j.State)
	dst = binary.BigEndian.AppendUint64(dst, uint64(j.Moved))
	dst = appendStr(dst, j.Cursor)
	dst = appendStr(dst, j.Tenant)
	return binary.BigEndian.AppendUint64(dst, uint64(j.Skipped))
}

// DecodeReplayJob decodes a replay job; the result shares no memory with b. It never panics.
func DecodeReplayJob(b []byte) (ReplayJob, error) {
	var j ReplayJob
	d := decoder{b: b}
	v := d.byte()
	if d.err == nil && v != jobVersion && v != jobVersionV1 {
		return ReplayJob{}, fmt.Errorf("replay job version %d: %w", v, ErrCorruptValue)
	}
	copy(j.ID[:], d.fixed(16))
	j.Kind = d.str()
	j.Source = d.str()
	j.Since = int64(d.uint64())
	j.Until = int64(d.uint64())
	j.Rate = math.Float64frombits(d.uint64())
	j.MaxLagMS = int64(d.uint64())
	j.CreatedAt = int64(d.uint64())
	j.State = d.str()
	j.Moved = int64(d.uint64())
	if c := d.bytes(); d.err == nil && len(c) > 0 {
		j.Cursor = bytes.Clone(c)
	}
	if v == jobVersion {
		j.Tenant = d.str()
		j.Skipped = int64(d.uint64())
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return ReplayJob{}, fmt.Errorf("cannot decode replay job: %w", d.err)
	}
	return j, nil
}

func appendJobKey(dst []byte, id [16]byte) []byte {
	dst = append(dst, jobPrefix...)
	return append(dst, id[:]...)
}

// Replay defaults: rate in items per second, lag in milliseconds.
const (
	DefaultReplayRate  = 1000
	MaxReplayRate      = 100_000
	DefaultReplayLagMS = 2000
)

// ErrReplayJob refuses a replay job that cannot run as asked (kind, window).
var ErrReplayJob = errors.New("store: invalid replay job")

// NewReplayJob returns a running job of kind from spec's kind, filters, window, rate and lag (ID, CreatedAt and
// State are set here; a rate or lag of 0 takes the default, a rate above MaxReplayRate is capped). An archive
// job needs Since < Until <= now: hooks received later are not archived yet, and a job that passed their place
// in the catalogue would never see them. Record it with PutReplayJob; a node picks it up on its next replay
// tick, or at its next boot when written into a stopped node's store.
func NewReplayJob(spec ReplayJob, now time.Time) (ReplayJob, error) {
	j := ReplayJob{ID: NewJobID(now), Kind: spec.Kind, Source: spec.Source, Tenant: spec.Tenant, Since: spec.Since,
		Until: spec.Until, Rate: spec.Rate, MaxLagMS: spec.MaxLagMS, CreatedAt: now.UnixMilli(), State: replayRunning}
	switch j.Kind {
	case ReplayKindDLQ:
	case ReplayKindArchive:
		if j.Since <= 0 || j.Until <= j.Since {
			return ReplayJob{}, fmt.Errorf("%w: an archive replay needs a window from < to, got [%d, %d)", ErrReplayJob, j.Since, j.Until)
		}
		if j.Until > j.CreatedAt {
			return ReplayJob{}, fmt.Errorf("%w: an archive replay window must end by now (%s), not %s", ErrReplayJob,
				now.UTC().Format(time.RFC3339), time.UnixMilli(j.Until).UTC().Format(time.RFC3339))
		}
	case ReplayKindLifecycle:
		if j.Until == 0 {
			j.Until = j.CreatedAt
		}
		if j.Since < 0 || j.Until <= j.Since || j.Until > j.CreatedAt || j.Source != "" {
			return ReplayJob{}, fmt.Errorf("%w: a lifecycle replay needs a window 0 <= from < to <= now and no source filter, got [%d, %d)",
				ErrReplayJob, j.Since, j.Until)
		}
	default:
		return ReplayJob{}, fmt.Errorf("%w: unsupported kind %q", ErrReplayJob, j.Kind)
	}
	if j.Rate <= 0 {
		j.Rate = DefaultReplayRate
	}
	j.Rate = min(j.Rate, MaxReplayRate)
	if j.MaxLagMS <= 0 {
		j.MaxLagMS = DefaultReplayLagMS
	}
	return j, nil
}

// NewJobID is a UUIDv7 of now: job ids sort by creation.
func NewJobID(now time.Time) [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[6:])
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = id[6]&0x0f | 0x70
	id[8] = id[8]&0x3f | 0x80
	return id
}

// PutReplayJob records j in one synced write: a new job, or new settings and state for an existing one. The
// progress of an existing job (Cursor, Moved, and State done) belongs to ReplayDeadStep and is kept; j is
// updated with it, so a steer racing a step never winds the job back.
func (db *DB) PutReplayJob(j *ReplayJob) error {
	db.cmu.Lock()
	defer db.cmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	stored, found, err := db.replayJobLocked(j.ID)
	if err != nil {
		return err
	}
	if found {
		j.Cursor, j.Moved, j.Skipped = stored.Cursor, stored.Moved, stored.Skipped
		if stored.State == replayDone {
			j.State = replayDone
		}
	}
	if err := db.rdb.PutCF(db.wo, db.cfs[cfDefault], appendJobKey(nil, j.ID), AppendReplayJob(nil, j)); err != nil {
		return &WriteError{Class: classify(err), Err: err}
	}
	if j.Kind == ReplayKindLifecycle {
		// The lifecycle publisher waits on the trail's notification: a new or resumed job starts at once.
		select {
		case db.anotify <- struct{}{}:
		default:
		}
	}
	return nil
}

// ReplayJob returns job id as recorded (found false when there is none).
func (db *DB) ReplayJob(id [16]byte) (j ReplayJob, found bool, err error) {
	err = db.read(func() error {
		j, found, err = db.replayJobLocked(id)
		return err
	})
	return j, found, err
}

// SteerReplayJob sets job id's state (running, paused or cancelled) in one synced write and returns the job
// as recorded; a job done or cancelled keeps its state (the caller compares). A job that is not there matches
// ErrNotFound.
func (db *DB) SteerReplayJob(id [16]byte, state string) (ReplayJob, error) {
	if state != replayRunning && state != replayPaused && state != replayCancelled {
		return ReplayJob{}, fmt.Errorf("%w: state must be running, paused or cancelled, got %q", ErrReplayJob, state)
	}
	j, found, err := db.ReplayJob(id)
	if err != nil {
		return ReplayJob{}, err
	}
	if !found {
		return ReplayJob{}, fmt.Errorf("replay job %s: %w", uuid.UUID(id), ErrNotFound)
	}
	if j.State == replayDone || j.State == replayCancelled {
		return j, nil
	}
	j.State = state
	if err := db.PutReplayJob(&j); err != nil {
		return ReplayJob{}, err
	}
	return j, nil
}

// LifecycleReplayCursor is the audit seq a lifecycle job's cursor holds (0: nothing published yet).
func LifecycleReplayCursor(j *ReplayJob) uint64 {
	if len(j.Cursor) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(j.Cursor)
}

// AdvanceReplayJob records a lifecycle job's step in one synced write: its cursor at audit seq, moved more
// events published, and (done) the job done unless it was paused or cancelled meanwhile. The state recorded
// is kept otherwise, so a step never undoes a steer; the job is returned as recorded.
func (db *DB) AdvanceReplayJob(id [16]byte, seq uint64, moved int64, done bool) (ReplayJob, error) {
	db.cmu.Lock()
	defer db.cmu.Unlock()
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return ReplayJob{}, ErrClosed
	}
	j, err := db.storedJobLocked(id)
	if err != nil {
		return ReplayJob{}, err
	}
	j.Cursor = binary.BigEndian.AppendUint64(nil, seq)
	j.Moved += moved
	if done && j.State == replayRunning {
		j.State = replayDone
	}
	if err := db.rdb.PutCF(db.wo, db.cfs[cfDefault], appendJobKey(nil, j.ID), AppendReplayJob(nil, &j)); err != nil {
		return ReplayJob{}, &WriteError{Class: classify(err), Err: err}
	}
	return j, nil
}

// lifecycleHold is the lowest audit seq a lifecycle replay job still has to read (running or paused: a
// paused job resumes where it stopped), or 0 when none holds the trail.
func (db *DB) lifecycleHold() (uint64, error) {
	jobs, err := db.ReplayJobs()
	if err != nil {
		return 0, err
	}
	var hold uint64
	for i := range jobs {
		j := &jobs[i]
		if j.Kind != ReplayKindLifecycle || (j.State != replayRunning && j.State != replayPaused) {
			continue
		}
		if next := LifecycleReplayCursor(j) + 1; hold == 0 || next < hold {
			hold = next
		}
	}
	return hold, nil
}

// ReplayJobs returns every recorded replay job, in id order (ids are UUIDv7: creation order).
func (db *DB) ReplayJobs() ([]ReplayJob, error) {
	var out []ReplayJob
	err := db.read(func() error {
		return db.scan(cfDefault, []byte(jobPrefix), func(k, v []byte) error {
			j, err := DecodeReplayJob(v)
			if err != nil {
				return fmt.Errorf("replay job %x: %w", k[len(jobPrefix):], err)
			}
			out = append(out, j)
			return nil
		})
	})
	return out, err
}

func (db *DB) replayJobLocked(id [16]byte) (ReplayJob, bool, error) {
	v, err := db.getCF(cfDefault, appendJobKey(nil, id))
	if err != nil || v == nil {
		return ReplayJob{}, false, err
	}
	j, err := DecodeReplayJob(v)
	if err != nil {
		return ReplayJob{}, false, fmt.Errorf("replay job %x: %w", id, err)
	}
	return j, true, nil
}

// ReplayDeadStep runs one step of DLQ replay job j: it visits the dead keys after the job's cursor in key
// order, moving up to limit matching rows (dead at or before the job's creation, within its source and
// since/until filters) back to due at now, as first attempts (attempts 0, errors cleared) carrying ReplayID = the
// job id as a UUID. The moved rows, the counters and the job (new Cursor and Moved; State done once the dead
// index is exhausted) are committed in one synced batch, so a restart resumes exactly after the last step.
//
// The job's stored record is authoritative: a job paused, cancelled or done since j was read moves nothing, and
// j is refreshed from what was committed. Rows dead after the job was created are skipped, so a replay never
// chases its own re-deaths. One step visits at most max(64×limit, 4096) keys.
func (db *DB) ReplayDeadStep(j *ReplayJob, limit int, now int64) (moved int, err error) {
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
	if job.State != replayRunning || limit <= 0 {
		*j = job
		return 0, nil
	}
	db.ed.reset()
	wb := db.owb
	wb.Clear()
	index := db.cfs[cfIndex]
	replayID := uuid.UUID(job.ID).String()

	db.wroUpper = append(db.wroUpper[:0], IndexDead+1)
	db.wro.SetIterateUpperBound(db.wroUpper)
	it := db.rdb.NewIteratorCF(db.wro, index)
	defer it.Close()
	if len(job.Cursor) > 0 {
		it.Seek(job.Cursor)
		if it.Valid() && bytes.Equal(it.Key().Data(), job.Cursor) {
			it.Next()
		}
	} else {
		it.Seek([]byte{IndexDead})
	}
	budget := max(replayVisitsPerRow*limit, minReplayVisits)
	visited := 0
	for ; it.Valid() && moved < limit && visited < budget; it.Next() {
		k := it.Key().Data()
		visited++
		db.lastKey = append(db.lastKey[:0], k...)
		dk, err := ParseDeadKey(k)
		if err != nil {
			return 0, err
		}
		if dk.At > job.CreatedAt || (job.Since > 0 && dk.At < job.Since) || (job.Until > 0 && dk.At > job.Until) {
			continue
		}
		size, err := ParseIndexValue(it.Value().Data())
		if err != nil {
			return 0, fmt.Errorf("dead key %+v: %w", dk, err)
		}
		row, found, err := db.readRow(DeliveryKey{Seq: dk.Seq, Sink: dk.Sink})
		switch {
		case !found:
			wb.DeleteCF(index, k)
			db.editLocked(dk.Ord).counts.dead--
			continue
		case err != nil:
			continue // undecodable: it stays in the DLQ, listed as such
		case job.Source != "" && row.Source != job.Source:
			continue
		}
		row.State, row.Attempts, row.DueAt, row.ReplayID = StatePending, 0, now, replayID
		row.LastError, row.DeadReason, row.DeadAt = "", "", 0
		db.putRow(wb, dk.Seq, dk.Sink, &row)
		wb.DeleteCF(index, k)
		db.okey = DueKey{Ord: dk.Ord, At: now, Seq: dk.Seq, Sink: dk.Sink}.Append(db.okey[:0])
		db.oval = AppendIndexValue(db.oval[:0], size)
		wb.PutCF(index, db.okey, db.oval)
		e := db.editLocked(dk.Ord)
		e.dueWritten(db.okey)
		e.counts.dead--
		e.counts.pending++
		e.counts.pendingBytes += int64(size)
		moved++
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("cannot scan the dead rows: %w", err)
	}
	if !it.Valid() {
		job.State = replayDone
	}
	if visited > 0 {
		job.Cursor = bytes.Clone(db.lastKey)
	}
	job.Moved += int64(moved)
	wb.PutCF(db.cfs[cfDefault], appendJobKey(db.okey[:0], job.ID), AppendReplayJob(nil, &job))
	db.putCountersLocked(wb)
	if err := db.rdb.Write(db.wo, wb); err != nil {
		return 0, &WriteError{Class: classify(err), Err: err}
	}
	db.applyEditsLocked(nil)
	*j = job
	if moved > 0 {
		db.wake()
	}
	return moved, nil
}

// storedJobLocked reads job id as committed (under cmu): a step acts on the stored record, never on a caller's
// copy that may predate a pause or cancel. A job that is gone matches ErrNotFound.
func (db *DB) storedJobLocked(id [16]byte) (ReplayJob, error) {
	job, found, err := db.replayJobLocked(id)
	if err != nil {
		return ReplayJob{}, err
	}
	if !found {
		return ReplayJob{}, fmt.Errorf("replay job %s: %w", uuid.UUID(id), ErrNotFound)
	}
	return job, nil
}
