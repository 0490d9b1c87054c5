package intake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ankusa-go/ankusa/store"
)

// Start runs boot recovery, then the reconciler every ReconcileInterval, until Stop. While recovery runs every
// commit is refused (ErrRecovering) and Recovering reports true.
func (d *Dual) Start() {
	d.tasks.Go(func(stop <-chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			err := d.Recover(ctx)
			if err == nil {
				break
			}
			d.opts.Tel.IntakeFailure("recovery")
			d.opts.Logger.Warn().Err(err).Msg("intake recovery failed; retrying (the node serves nothing until it is done)")
			select {
			case <-stop:
				return
			case <-time.After(d.opts.ReconcileInterval):
			}
		}
		t := time.NewTicker(d.opts.ReconcileInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d.Reconcile()
			}
		}
	})
}

// Recover is boot recovery: it replays the log from the watermark with the one rule of store.ApplyHooks (a
// seq that holds a hook is skipped: a duplicate or reordered record changes nothing), republishes the local
// hooks above the watermark that the log does not hold, and writes the new watermark. It ends recovery (commits
// are taken) only when all of that is done.
func (d *Dual) Recover(ctx context.Context) error {
	db := d.opts.DB()
	if db == nil {
		return store.ErrClosed
	}
	raw, err := db.IntakeWatermark()
	if err != nil {
		return fmt.Errorf("intake: cannot read the watermark: %w", err)
	}
	wm := Watermark{Offsets: map[int32]int64{}}
	if raw != nil {
		if wm, err = DecodeWatermark(raw); err != nil {
			return err
		}
	}
	local := map[uint64]Entry{}
	err = db.ForEachIntakePending(func(seq uint64, r *store.Record) error {
		local[seq] = Entry{Seq: seq, ID: r.ID, Bytes: store.AppendEntry(nil, r, seq)}
		return nil
	})
	if err != nil {
		return fmt.Errorf("intake: cannot read the pending set: %w", err)
	}
	var (
		recs             []*store.Record
		seqs, confirmed  []uint64
		read, applied, n int
	)
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		ok, err := db.ApplyHooks(recs, seqs)
		if err != nil {
			return fmt.Errorf("intake: cannot apply replayed hooks: %w", err)
		}
		for _, a := range ok {
			if a {
				applied++
			}
		}
		recs, seqs = recs[:0], seqs[:0]
		return nil
	}
	end, err := d.opts.Reader.Read(ctx, wm.Offsets, func(p int32, off int64, v []byte) error {
		rec, err := DecodeRecord(v)
		if err != nil {
			d.opts.Logger.Warn().Err(err).Int32("partition", p).Int64("offset", off).Msg("intake record skipped")
			return nil
		}
		if rec.Node != d.opts.Node || rec.Kind != KindHooks {
			return nil
		}
		read++
		for _, e := range rec.Entries {
			if e.Seq < wm.Seq {
				continue
			}
			if l, ok := local[e.Seq]; ok && l.ID == e.ID {
				confirmed = append(confirmed, e.Seq)
				delete(local, e.Seq)
				continue
			}
			r, seq, err := store.DecodeEntry(e.Bytes)
			if err != nil || seq != e.Seq || r.ID != e.ID {
				d.opts.Logger.Warn().Err(err).Uint64("seq", e.Seq).Msg("intake entry skipped: it does not decode to its header")
				continue
			}
			recs, seqs = append(recs, &r), append(seqs, seq)
			n++
			if len(recs) >= 512 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	rest := slices.Collect(maps.Values(local))
	slices.SortFunc(rest, func(a, b Entry) int { return compareSeq(a.Seq, b.Seq) })
	var offsets map[int32]int64
	if len(rest) > 0 {
		c := <-d.opts.Log.Publish(rest)
		d.opts.Tel.IntakePublished(c.Took, c.Err)
		if c.Err != nil {
			return fmt.Errorf("intake: cannot republish %d local hooks above the watermark: %w", len(rest), c.Err)
		}
		offsets = c.Offsets
		for _, e := range rest {
			confirmed = append(confirmed, e.Seq)
		}
	}
	d.mu.Lock()
	d.next = max(d.next, db.NextSeq())
	for p, e := range end {
		d.high[p] = max(d.high[p], e)
	}
	for p, o := range offsets {
		d.high[p] = max(d.high[p], o+1)
	}
	// Partitions the replay did not reach keep their offsets.
	for p, o := range wm.Offsets {
		if _, ok := d.high[p]; !ok {
			d.high[p] = o
		}
	}
	nwm := d.watermarkLocked()
	d.mu.Unlock()
	if err := db.SyncIntakeWatermark(AppendWatermark(nil, nwm), confirmed); err != nil {
		return fmt.Errorf("intake: cannot write the watermark: %w", err)
	}
	d.recovering.Store(false)
	d.opts.Tel.IntakeReady(d.br.allow())
	d.opts.Logger.Info().Uint64("from_seq", wm.Seq).Int("records_read", read).Int("entries_read", n).
		Int("hooks_applied", applied).Int("republished", len(rest)).Uint64("watermark_seq", nwm.Seq).
		Msg("intake recovery done")
	return nil
}

func compareSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Reconcile is one pass of the reconciler: it republishes the local-only hooks (or, with none and the breaker
// open, publishes a probe), applies the log-only ones to the store, and writes the watermark.
func (d *Dual) Reconcile() {
	d.mu.Lock()
	var localOnly, logOnly []Entry
	var oldest time.Time
	for _, p := range d.pend {
		switch p.state {
		case stateLocalOnly:
			localOnly = append(localOnly, p.e)
		case stateLogOnly:
			logOnly = append(logOnly, p.e)
		}
		if oldest.IsZero() || p.since.Before(oldest) {
			oldest = p.since
		}
	}
	n := len(d.pend)
	d.mu.Unlock()
	age := time.Duration(0)
	if !oldest.IsZero() {
		age = time.Since(oldest)
	}
	d.opts.Tel.IntakePending(n, age)

	if len(localOnly) > 0 || !d.br.allow() {
		slices.SortFunc(localOnly, func(a, b Entry) int { return compareSeq(a.Seq, b.Seq) })
		c := <-d.opts.Log.Publish(localOnly) // none: a probe
		d.opts.Tel.IntakePublished(c.Took, c.Err)
		d.br.record(c.Err == nil)
		if c.Err == nil && len(localOnly) > 0 {
			d.mu.Lock()
			seqs := d.confirmedLocked(localOnly, c.Offsets)
			d.mu.Unlock()
			d.flush(seqs)
			d.opts.Logger.Info().Int("hooks", len(localOnly)).Msg("intake reconciler: local-only hooks confirmed in the log")
		} else if c.Err != nil {
			d.opts.Tel.IntakeFailure("reconcile")
		}
	}
	if len(logOnly) > 0 {
		if err := d.applyLogOnly(logOnly); err != nil {
			d.opts.Tel.IntakeFailure("reconcile")
			d.opts.Logger.Warn().Err(err).Int("hooks", len(logOnly)).Msg("intake reconciler: cannot write log-only hooks here yet")
		}
	}
	d.mu.Lock()
	dirty := d.wmDirty
	d.mu.Unlock()
	if dirty {
		d.flush(nil)
	}
	d.mu.Lock()
	n = len(d.pend)
	d.mu.Unlock()
	if n == 0 {
		d.opts.Tel.IntakePending(0, 0)
	}
	d.opts.Tel.IntakeReady(d.Ready())
}

// applyLogOnly writes hooks the log confirmed but the local write lost.
func (d *Dual) applyLogOnly(entries []Entry) error {
	db := d.opts.DB()
	if db == nil {
		return store.ErrClosed
	}
	recs := make([]*store.Record, 0, len(entries))
	seqs := make([]uint64, 0, len(entries))
	for _, e := range entries {
		r, seq, err := store.DecodeEntry(e.Bytes)
		if err != nil {
			return errors.Join(fmt.Errorf("intake: entry of seq %d", e.Seq), err)
		}
		recs, seqs = append(recs, &r), append(seqs, seq)
	}
	if _, err := db.ApplyHooks(recs, seqs); err != nil {
		return err
	}
	d.mu.Lock()
	for _, e := range entries {
		delete(d.pend, e.Seq)
		delete(d.ids, e.ID)
	}
	d.wmDirty = true
	d.mu.Unlock()
	return nil
}
