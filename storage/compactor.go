package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
)

// Compaction stages, the values of ankusa_compact_failures_total{stage}.
const (
	StageRead       = "read"        // reading obligations or hooks from the store
	StagePutSegment = "put_segment" // the segment object was not written
	StagePutIndex   = "put_index"   // the index object was not written
	StageManifest   = "manifest"    // the node-day manifest was not written
	StageCatalogue  = "catalogue"   // the catalogue batch (which clears the obligations) was not written
	StageRetention  = "retention"   // archive.retention_days' sweep failed
)

// StageError is a failed compaction or retention sweep and the stage it failed at.
type StageError struct {
	Stage string
	Err   error
}

func (e *StageError) Error() string { return "storage: " + e.Stage + ": " + e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// maxSegmentRecords bounds the hooks of one segment whatever their size, so the catalogue batch stays bounded.
const maxSegmentRecords = 1 << 16

// CompactorOptions configure a Compactor.
type CompactorOptions struct {
	DB   func() *store.DB // the open store, nil while it is closed
	Blob blob.Store
	Node string // node id: one key part (ValidNode)
	// RollBytes caps a segment object (storage.roll_bytes); a single bigger hook gets a segment of its own.
	RollBytes int64
	// RollAge (storage.roll_ms): obligations that do not fill RollBytes wait until the oldest is this old.
	RollAge time.Duration
	// Retention (archive.retention_days; 0 = off) deletes segments whose newest hook is older.
	Retention time.Duration
	Log       zerolog.Logger
	Now       func() time.Time // nil: time.Now
}

// Compacted describes one segment written and catalogued.
type Compacted struct {
	Segment   store.SegmentEntry
	Records   int
	Reclaimed int // hooks deleted because the archive held them last
	Duration  time.Duration
}

// Result is what one Compact did.
type Result struct {
	Segment *Compacted // nil: nothing written (no obligations, or waiting for roll_ms)
	// More: obligations beyond this segment are waiting now (the segment was full); compact again at once.
	More bool
}

// Compactor packs archive obligations into segments (seed, Compactor row: "takes archive obligations byte-sized
// up to storage.roll_bytes and packs them into one immutable segment plus one index object. A failed blob write
// ends the tick and the same hooks are retried next tick"). It is driven by one goroutine at a time (the
// compactor actor's task); its state is rebuilt from the store, so a new Compactor needs nothing from an old one.
type Compactor struct {
	o CompactorOptions

	after uint64 // every obligation up to this seq is catalogued (this incarnation's view)
	// retry is the segment a failed compaction built (in b and idx), whose catalogue batch has not succeeded:
	// the next call writes it again as it is, same hooks, same keys, same bytes.
	retry   *built
	b       Builder
	idx     []byte
	missing []uint64
	hooks   []store.ArchivedHook
	// stored is the stored/charged bytes ratio of the hooks of the last segment encoded, with which the
	// obligations waiting are measured from their charged sizes alone (0: none yet, taken as 1).
	stored float64
	// waiting is the measure of the obligations after measuredAfter, kept while they wait (young and not a
	// full segment), so the next tick measures only those committed since; any other outcome of build drops it.
	waiting       store.ObligationsMeasure
	measuredAfter uint64
	measured      bool
}

// built is one segment encoded from the obligations after Compactor.after up to last.
type built struct {
	e       store.SegmentEntry // without CreatedAt; SegmentKey and IndexKey set (zero when no record)
	seg     []byte             // the segment object (in Compactor.b)
	idx     []byte             // its index object (Compactor.idx)
	hooks   []store.ArchivedHook
	missing []uint64 // obligations whose hook is gone or unreadable: cleared, nothing archived
	last    uint64   // the last obligation taken
	more    bool     // obligations beyond last were waiting
}

// NewCompactor returns a compactor; it refuses a node id that cannot be a key part.
func NewCompactor(o CompactorOptions) (*Compactor, error) {
	if !ValidNode(o.Node) {
		return nil, fmt.Errorf("storage: node id %q cannot name an object key part ([A-Za-z0-9._=-])", o.Node)
	}
	if o.RollBytes <= SegmentOverhead+FrameOverhead {
		return nil, fmt.Errorf("storage: roll_bytes %d leaves no room for a record", o.RollBytes)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Compactor{o: o}, nil
}

// Compact writes at most one segment: it reads obligations in seq order up to RollBytes, and unless they fill
// it or the oldest is RollAge old, waits for more (writes nothing). Otherwise it PUTs the segment, its index and
// the node-day manifest, then catalogues the segment and clears the obligations (store.CatalogueSegment). Any
// error is a *StageError and leaves every obligation in place: the next call retries the same hooks.
//
// The hooks are copied from the store's iterator straight into the segment (store.ScanObligations), never
// cloned one by one; the segment a failed call built is kept and written again by the next.
func (c *Compactor) Compact(ctx context.Context) (Result, error) {
	return c.CompactPaced(ctx, nil)
}

// CompactPaced is Compact with its work spread by pace (nil: none): a Step every few dozen hooks read, between
// the objects written, and between the store's catalogue and clearing batches.
func (c *Compactor) CompactPaced(ctx context.Context, pace *Pacer) (Result, error) {
	db := c.o.DB()
	if db == nil {
		return Result{}, &StageError{Stage: StageRead, Err: store.ErrClosed}
	}
	start := time.Now()
	s := c.retry
	if s == nil {
		var err error
		if s, err = c.build(db, pace); err != nil {
			return Result{}, &StageError{Stage: StageRead, Err: err}
		}
		if s == nil {
			return Result{}, nil
		}
	}
	c.retry = s // until the catalogue batch succeeds
	if len(s.hooks) == 0 {
		if _, err := db.CatalogueSegment(nil, nil, s.missing, pace.Step); err != nil {
			return Result{}, &StageError{Stage: StageCatalogue, Err: err}
		}
		c.done(s)
		return Result{More: s.more}, nil
	}
	e := s.e
	if err := c.o.Blob.Put(ctx, e.SegmentKey, objectReader(s.seg, pace), int64(len(s.seg))); err != nil {
		return Result{}, &StageError{Stage: StagePutSegment, Err: err}
	}
	pace.Step()
	if err := c.o.Blob.Put(ctx, e.IndexKey, objectReader(s.idx, pace), int64(len(s.idx))); err != nil {
		return Result{}, &StageError{Stage: StagePutIndex, Err: err}
	}
	pace.Step()
	day := Day(e.MinReceivedAt)
	if err := c.writeManifest(ctx, db, day, &e, 0); err != nil {
		return Result{}, &StageError{Stage: StageManifest, Err: err}
	}
	e.CreatedAt = c.o.Now().UnixMilli()
	pace.Step()
	reclaimed, err := db.CatalogueSegment(&e, s.hooks, s.missing, pace.Step)
	if err != nil {
		return Result{}, &StageError{Stage: StageCatalogue, Err: err}
	}
	c.done(s)
	return Result{Segment: &Compacted{Segment: e, Records: len(s.hooks), Reclaimed: reclaimed, Duration: time.Since(start)},
		More: s.more}, nil
}

// build encodes the next segment from the obligations after c.after; nil when there are none, or when they do
// not fill RollBytes and the oldest is younger than RollAge. While the oldest is young the obligations are only
// measured from their keys and charged sizes (store.MeasureMore: no hook is read but the oldest's head), each
// once however many ticks it waits, and encoded by one scan once they fill it.
func (c *Compactor) build(db *store.DB, pace *Pacer) (*built, error) {
	maxBytes := c.o.RollBytes - SegmentOverhead
	now := c.o.Now()
	enough := func(m *store.ObligationsMeasure) bool {
		if m.Count >= 1 && (m.FirstReceivedAt == 0 || now.Sub(time.UnixMilli(m.FirstReceivedAt)) >= c.o.RollAge) {
			return true // the oldest is due (or its hook is missing: cleared at once)
		}
		return m.Count > maxSegmentRecords || c.estimate(m.Count, m.Charged) >= maxBytes
	}
	if !c.measured || c.measuredAfter != c.after {
		c.waiting, c.measuredAfter, c.measured = store.ObligationsMeasure{Last: c.after}, c.after, true
	}
	m := &c.waiting
	// The obligations measured on earlier ticks may have become due, or a full segment now that the
	// stored/charged ratio moved: asked before measuring those committed since.
	stop := m.Count > 0 && enough(m)
	if !stop {
		if err := db.MeasureMore(m, enough); err != nil {
			c.measured = false
			return nil, err
		}
		stop = m.Stopped
	}
	if !stop {
		return nil, nil // none, or young and not a full segment yet: the measure waits with them
	}
	c.measured = false
	s := &built{missing: c.missing[:0]}
	if cap(c.b.buf) == 0 {
		c.b.buf = make([]byte, 0, c.firstCap(db, m))
	}
	c.b.Reset()
	var charged, stored int64
	n := 0
	more, err := db.ScanObligations(c.after, maxBytes, FrameOverhead, maxSegmentRecords, func(seq uint64, size uint32, v []byte) error {
		n++
		if v != nil {
			charged, stored = charged+int64(size), stored+int64(len(v))
		}
		c.add(s, seq, v)
		if n%paceEvery == 0 {
			pace.Step()
		}
		return nil
	})
	if err != nil || n == 0 {
		return nil, err
	}
	if charged > 0 {
		c.stored = float64(stored) / float64(charged)
	}
	s.more = more
	c.missing = s.missing
	if c.b.Count() == 0 {
		return s, nil
	}
	seg, idx, sum := c.b.Finish(c.idx)
	c.idx = idx
	ents := c.b.Entries()
	e := store.SegmentEntry{FirstSeq: ents[0].Seq, LastSeq: ents[len(ents)-1].Seq, Count: uint32(len(ents)),
		Bytes: int64(len(seg)), MinReceivedAt: ents[0].ReceivedAt, MaxReceivedAt: ents[0].ReceivedAt, SHA256: sum}
	hooks := c.hooks[:0]
	for _, en := range ents {
		e.MinReceivedAt = min(e.MinReceivedAt, en.ReceivedAt)
		e.MaxReceivedAt = max(e.MaxReceivedAt, en.ReceivedAt)
		hooks = append(hooks, store.ArchivedHook{Seq: en.Seq, ID: en.ID, Offset: en.Offset, Length: en.Length})
	}
	c.hooks = hooks
	e.SegmentKey, e.IndexKey = SegmentKeys(c.o.Node, Day(e.MinReceivedAt), e.FirstSeq, e.LastSeq)
	s.e, s.seg, s.idx, s.hooks = e, seg, idx, hooks
	return s, nil
}

// paceEvery is how many hooks the build reads between two pace steps: a few dozen µs of work at 1 KiB.
const paceEvery = 64

// firstCap is the capacity of the segment buffer's first allocation: the obligations waiting (at most
// RollBytes' worth), each taken as big as the first one's hook and a quarter more, so one allocation holds the
// first segment. The runtime clears a big allocation from reused heap memory, touching every page, so one at
// RollBytes cost a node whose segments roll by age well below it page faults for megabytes it never used (a
// quarter of the compactor's CPU in a five-second loopback run); a later, bigger segment
// grows the buffer (Builder.Add doubles it), which then serves every segment after it.
func (c *Compactor) firstCap(db *store.DB, m *store.ObligationsMeasure) int64 {
	limit := min(c.o.RollBytes, 64<<20)
	per := int64(m.FirstBytes)
	if per <= 0 {
		per = 1 << 10
	}
	n := max(db.Counts().ArchivePending, int64(m.Count))
	if n > limit/(per+FrameOverhead) {
		return limit
	}
	return min(limit, max(64<<10, n*(per+FrameOverhead)*5/4+SegmentOverhead))
}

// estimate is the segment bytes n obligations whose bodies were charged charged bytes take: the bodies scaled
// by the stored/charged ratio of the last segment encoded (a hook is its body plus headers and metadata), plus
// a frame each.
func (c *Compactor) estimate(n int, charged int64) int64 {
	r := c.stored
	if r < 1 {
		r = 1
	}
	return int64(float64(charged)*r) + int64(n)*FrameOverhead
}

// add puts obligation seq's hook v (nil: missing) into the segment being built, or into s.missing when it is
// gone or cannot be decoded; s.last follows.
func (c *Compactor) add(s *built, seq uint64, v []byte) {
	s.last = seq
	if v == nil {
		c.o.Log.Error().Uint64("seq", seq).Msg("archive obligation without its hook: cleared, nothing to archive")
		s.missing = append(s.missing, seq)
		return
	}
	if err := c.b.Add(seq, v); err != nil {
		c.o.Log.Error().Err(err).Uint64("seq", seq).Msg("archive obligation's hook cannot be decoded: cleared, not archived")
		s.missing = append(s.missing, seq)
	}
}

func (c *Compactor) done(s *built) {
	c.after = max(c.after, s.last)
	c.retry = nil
}

// writeManifest rewrites the manifest of node-day day from the catalogue, with add (not catalogued yet) in it
// and the segment starting at drop (0: none) left out; a manifest left with no segment is deleted.
func (c *Compactor) writeManifest(ctx context.Context, db *store.DB, day string, add *store.SegmentEntry, drop uint64) error {
	dir := dayDir(c.o.Node, day) + "/"
	t, err := time.Parse("2006-01-02", day)
	if err != nil {
		return err
	}
	var segs []ManifestSegment
	// A segment is in day's directory when its oldest hook is on day, so it overlaps the day.
	err = db.Segments(t.UnixMilli(), t.Add(24*time.Hour).UnixMilli()-1, func(e store.SegmentEntry) error {
		if strings.HasPrefix(e.SegmentKey, dir) && e.FirstSeq != drop && (add == nil || e.FirstSeq != add.FirstSeq) {
			segs = append(segs, manifestSegment(&e))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if add != nil {
		segs = append(segs, manifestSegment(add))
	}
	key := ManifestKey(c.o.Node, day)
	if len(segs) == 0 {
		return c.o.Blob.Delete(ctx, key)
	}
	m := encodeManifest(c.o.Node, day, segs)
	return c.o.Blob.Put(ctx, key, bytes.NewReader(m), int64(len(m)))
}

// Retain deletes every segment whose newest hook is older than the retention (archive.retention_days): its
// segment object, its index, then its catalogue row, then rewrites its node-day manifest. It returns how many
// segments it deleted; nothing when retention is off. An object already gone (a bucket lifecycle rule) is not
// an error.
func (c *Compactor) Retain(ctx context.Context) (int, error) {
	if c.o.Retention <= 0 {
		return 0, nil
	}
	db := c.o.DB()
	if db == nil {
		return 0, &StageError{Stage: StageRetention, Err: store.ErrClosed}
	}
	cutoff := c.o.Now().Add(-c.o.Retention).UnixMilli()
	var expired []store.SegmentEntry
	err := db.Segments(0, cutoff, func(e store.SegmentEntry) error {
		if e.MaxReceivedAt < cutoff {
			expired = append(expired, e)
		}
		return nil
	})
	if err != nil {
		return 0, &StageError{Stage: StageRetention, Err: err}
	}
	n := 0
	for _, e := range expired {
		if err := ctx.Err(); err != nil {
			return n, &StageError{Stage: StageRetention, Err: err}
		}
		for _, k := range []string{e.SegmentKey, e.IndexKey} {
			if err := c.o.Blob.Delete(ctx, k); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return n, &StageError{Stage: StageRetention, Err: fmt.Errorf("cannot delete %s: %w", k, err)}
			}
		}
		if err := db.DeleteSegment(e.FirstSeq); err != nil {
			return n, &StageError{Stage: StageRetention, Err: err}
		}
		n++
		if err := c.writeManifest(ctx, db, Day(e.MinReceivedAt), nil, e.FirstSeq); err != nil {
			return n, &StageError{Stage: StageRetention, Err: fmt.Errorf("manifest of %s: %w", Day(e.MinReceivedAt), err)}
		}
	}
	return n, nil
}
